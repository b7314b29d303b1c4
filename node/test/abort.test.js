'use strict'
// One AbortSignal shared by many concurrent operations (executor runs, client streams, agent
// runs): ferroloop keeps one listener on it whatever their number, so Node never warns of a
// listener leak (MaxListenersExceededWarning, from the eleventh listener on), every operation
// still sees the abort, and nothing is left on the signal once they are done.

const test = require('node:test')
const assert = require('node:assert/strict')
const { getEventListeners } = require('node:events')
const ferroloop = require('..')
const { onAbort } = require('../lib/abort.js')
const { serveScript, anthropicEvents } = require('./replay.js')

const { Agent, Client, ToolExecutor, AbortError } = ferroloop
const OPERATIONS = 15

const warnings = []
process.on('warning', (warning) => warnings.push(warning))

const listenersOn = (signal) => getEventListeners(signal, 'abort').length

/** Asserts Node emitted no warning (they are emitted on the next tick). */
async function assertNoWarnings() {
  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(
    warnings.map((w) => `${w.name}: ${w.message}`),
    [],
  )
}

/** Resolves once `count` calls of the returned `arrive` were made. */
function countdown(count) {
  let arrive
  const all = new Promise((resolve) => {
    let left = count
    arrive = () => {
      if (--left === 0) resolve()
    }
  })
  return { all, arrive }
}

test('onAbort: callbacks run once, in subscription order; an unsubscribed one never runs', () => {
  const controller = new AbortController()
  const calls = []
  const first = onAbort(controller.signal, () => calls.push('first'))
  let third
  onAbort(controller.signal, () => {
    calls.push('second')
    third() // unsubscribed while the callbacks run: skipped, as a removed listener is
  })
  third = onAbort(controller.signal, () => calls.push('third'))
  onAbort(controller.signal, () => calls.push('fourth'))
  const gone = onAbort(controller.signal, () => calls.push('gone'))
  gone()
  gone()
  assert.equal(listenersOn(controller.signal), 1)
  controller.abort()
  controller.abort()
  assert.deepEqual(calls, ['first', 'second', 'fourth'])
  first() // after the abort: nothing to do
  assert.equal(listenersOn(controller.signal), 0)
})

test('onAbort: the last unsubscription removes the listener; an aborted signal gets none', () => {
  const controller = new AbortController()
  const own = () => {}
  controller.signal.addEventListener('abort', own)
  const a = onAbort(controller.signal, () => assert.fail('unsubscribed'))
  const b = onAbort(controller.signal, () => assert.fail('unsubscribed'))
  assert.equal(listenersOn(controller.signal), 2)
  a()
  assert.equal(listenersOn(controller.signal), 2)
  b()
  assert.deepEqual(getEventListeners(controller.signal, 'abort'), [own], "the caller's own listener stays")
  // Subscribing again after everyone left works as the first time.
  let called = 0
  onAbort(controller.signal, () => called++)
  controller.abort()
  assert.equal(called, 1)

  const aborted = AbortSignal.abort()
  onAbort(aborted, () => assert.fail('an aborted signal never calls back'))()
  assert.equal(listenersOn(aborted), 0)
})

test(`${OPERATIONS} executor runs on one signal: one listener, every run aborted, none left after`, async () => {
  const started = countdown(OPERATIONS)
  const executor = new ToolExecutor().tool({ name: 'wait', concurrencySafe: true }, (_input, ctx) => {
    started.arrive()
    return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped')))
  })
  const controller = new AbortController()
  const use = (i) => [{ type: 'tool_use', id: `toolu_${i}`, name: 'wait', input: {} }]
  const runs = Array.from({ length: OPERATIONS }, (_, i) => executor.run(use(i), { signal: controller.signal }))
  await started.all
  assert.equal(listenersOn(controller.signal), 1)
  const reason = new Error('shutting down')
  controller.abort(reason)
  const outcomes = await Promise.allSettled(runs)
  for (const outcome of outcomes) {
    assert.equal(outcome.status, 'rejected')
    assert.ok(outcome.reason instanceof AbortError, String(outcome.reason))
    assert.equal(outcome.reason.cause, reason)
  }
  assert.equal(listenersOn(controller.signal), 0)

  // Runs that end by themselves unsubscribe too.
  const quick = new ToolExecutor().tool({ name: 'wait', concurrencySafe: true }, () => 'done')
  const shared = new AbortController()
  const results = await Promise.all(Array.from({ length: OPERATIONS }, (_, i) => quick.run(use(i), { signal: shared.signal })))
  assert.deepEqual(
    results.map(([r]) => r.content),
    Array(OPERATIONS).fill('done'),
  )
  assert.equal(listenersOn(shared.signal), 0)
  await assertNoWarnings()
})

test(`${OPERATIONS} client streams on one signal: one listener, every stream aborted, none left after`, async () => {
  const stalled = {
    body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, world' }]) },
    fault: { kind: 'stall_after', bytes: 400, ms: 60000 },
  }
  const server = await serveScript({ responses: [stalled], when_exhausted: 'repeat_last' })
  const controller = new AbortController()
  let reads = []
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url, maxRetries: 0 })
    const request = { model: 'replay', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
    const started = countdown(OPERATIONS)
    reads = Array.from({ length: OPERATIONS }, async () => {
      for await (const event of client.stream(request, { signal: controller.signal })) {
        if (event.type === 'message_start') started.arrive()
      }
    })
    await started.all
    assert.equal(listenersOn(controller.signal), 1)
    controller.abort()
    for (const outcome of await Promise.allSettled(reads)) {
      assert.equal(outcome.status, 'rejected')
      assert.ok(outcome.reason instanceof AbortError, String(outcome.reason))
    }
    assert.equal(listenersOn(controller.signal), 0)
  } finally {
    // On a failed assertion too: nothing may outlive the test, nor reject unobserved.
    controller.abort()
    await Promise.allSettled(reads)
    await server.close()
  }
  await assertNoWarnings()
})

test(`${OPERATIONS} agent runs on one signal: one listener, every run stops as aborted, none left after`, async () => {
  const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_wait', name: 'wait', input: {} }], { stopReason: 'tool_use' })
  const server = await serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' })
  const controller = new AbortController()
  let runs = []
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url })
    const started = countdown(OPERATIONS)
    const executor = new ToolExecutor().tool({ name: 'wait' }, (_input, ctx) => {
      started.arrive()
      return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped')))
    })
    const agent = new Agent(client, { model: 'replay', tools: executor })
    runs = Array.from({ length: OPERATIONS }, async () => {
      let stop
      for await (const event of agent.run('Go.', { signal: controller.signal })) if (event.type === 'stop') stop = event
      return stop
    })
    await started.all
    assert.equal(listenersOn(controller.signal), 1)
    controller.abort()
    for (const stop of await Promise.all(runs)) assert.equal(stop.reason, 'aborted')
    assert.equal(listenersOn(controller.signal), 0)
  } finally {
    // On a failed assertion too: nothing may outlive the test, nor reject unobserved.
    controller.abort()
    await Promise.allSettled(runs)
    await server.close()
  }
  await assertNoWarnings()
})
