'use strict'
// The caller's async context reaches the tools: AsyncLocalStorage values active where
// `executor.run(...)`, a turn's `submit(...)` or `agent.run(...)` was called are visible inside
// the tool functions, whichever wake-up (a microtask, a native callback) starts the call.
const test = require('node:test')
const assert = require('node:assert/strict')
const { AsyncLocalStorage } = require('node:async_hooks')

const { Agent, Client, ToolExecutor } = require('../lib/index.js')
const { serveScript, anthropicEvents } = require('./replay.js')

const als = new AsyncLocalStorage()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const use = (id, name, input = {}) => ({ type: 'tool_use', id, name, input })

/** `syncProbe` and `asyncProbe` return the store they see (after `input.ms`, for overlap). */
function probingExecutor(options) {
  return new ToolExecutor(options)
    .tool({ name: 'syncProbe', concurrencySafe: true }, () => String(als.getStore()))
    .tool({ name: 'asyncProbe', concurrencySafe: true }, async ({ ms = 0 }) => {
      await sleep(ms)
      return String(als.getStore())
    })
    .tool({ name: 'timed', concurrencySafe: true, timeoutMs: 10000 }, async ({ ms = 0 }) => {
      // A tool with a timeout takes the native future path (its calls start from the queues).
      await sleep(ms)
      return String(als.getStore())
    })
}

const contents = (results) => results.map((r) => r.content)

test('run: sync and async tools see the store active where run() was called', async () => {
  const ex = probingExecutor()
  const results = await als.run('req-1', () => ex.run([use('a', 'syncProbe'), use('b', 'asyncProbe'), use('c', 'timed')]))
  assert.deepEqual(contents(results), ['req-1', 'req-1', 'req-1'])
})

test('run: calls started later (behind an exclusive call, past the cap) see the store too', async () => {
  const ex = probingExecutor({ maxConcurrency: 1 }).tool({ name: 'exclusive' }, async () => {
    await sleep(5)
    return String(als.getStore())
  })
  const uses = [use('x1', 'exclusive'), use('s', 'syncProbe'), use('a', 'asyncProbe', { ms: 2 }), use('t', 'timed', { ms: 2 })]
  uses.push(use('x2', 'exclusive'), use('s2', 'syncProbe'), use('t2', 'timed'))
  const results = await als.run('req-queued', () => ex.run(uses))
  assert.deepEqual(contents(results), new Array(uses.length).fill('req-queued'))
})

test('run: calls started by a native wake-up (after a timeout and its grace) see the store', async () => {
  // The call after `stuck` starts when the runtime's timer ends stuck's cleanup grace: that
  // wake-up comes from a native callback, outside any JS async context.
  const ex = probingExecutor({ cleanupGraceMs: 10 }).tool({ name: 'stuck', timeoutMs: 20 }, () => new Promise(() => {}))
  const uses = [use('x', 'stuck'), use('s', 'syncProbe'), use('a', 'asyncProbe'), use('t', 'timed')]
  const results = await als.run('req-after-timeout', () => ex.run(uses))
  assert.equal(results[0].is_error, true)
  assert.deepEqual(contents(results).slice(1), ['req-after-timeout', 'req-after-timeout', 'req-after-timeout'])
})

test('run: concurrent runs on one executor each see their own store', async () => {
  const ex = probingExecutor({ maxConcurrency: 50 })
  const names = ['syncProbe', 'asyncProbe', 'timed']
  const one = (store) =>
    als.run(store, () => ex.run(Array.from({ length: 6 }, (_, n) => use(`${store}_${n}`, names[n % 3], { ms: 10 }))))
  const stores = ['r1', 'r2', 'r3', 'r4']
  const all = await Promise.all(stores.map(one))
  all.forEach((results, k) => assert.deepEqual(contents(results), new Array(6).fill(stores[k])))
})

test('turn: each call sees the store of the submit() that submitted it', async () => {
  const ex = probingExecutor()
  const turn = als.run('turn-creator', () => ex.turn())
  als.run('sub-a', () => turn.submit(use('a', 'syncProbe'), use('b', 'asyncProbe', { ms: 5 })))
  als.run('sub-b', () => turn.submit(use('c', 'timed', { ms: 5 }), use('d', 'asyncProbe')))
  await sleep(2)
  als.run('sub-c', () => turn.submit(use('e', 'syncProbe'), use('f', 'timed')))
  turn.seal()
  const results = await turn.results()
  assert.deepEqual(contents(results), ['sub-a', 'sub-a', 'sub-b', 'sub-b', 'sub-c', 'sub-c'])
})

test('turn: calls started by a native wake-up see the store of their submit', async () => {
  const ex = probingExecutor({ cleanupGraceMs: 10 }).tool({ name: 'stuck', timeoutMs: 20 }, () => new Promise(() => {}))
  const turn = ex.turn()
  als.run('sub-stuck', () => turn.submit(use('x', 'stuck'), use('s', 'syncProbe'), use('a', 'asyncProbe')))
  turn.seal()
  const results = await turn.results()
  assert.deepEqual(contents(results).slice(1), ['sub-stuck', 'sub-stuck'])
})

test('turn: concurrent turns each see their own store', async () => {
  const ex = probingExecutor({ maxConcurrency: 50 })
  const one = (store) =>
    als.run(store, async () => {
      const turn = ex.turn()
      for (const [n, name] of ['asyncProbe', 'syncProbe', 'timed', 'asyncProbe'].entries()) {
        turn.submit(use(`${store}_${n}`, name, { ms: 10 }))
        await sleep(1)
      }
      turn.seal()
      return turn.results()
    })
  const stores = ['t1', 't2', 't3']
  const all = await Promise.all(stores.map(one))
  all.forEach((results, k) => assert.deepEqual(contents(results), new Array(4).fill(stores[k])))
})

function toolTurnScript(ids) {
  const names = ['asyncProbe', 'syncProbe', 'timed']
  const blocks = ids.map((id, n) => ({ type: 'tool_use', id, name: names[n % 3], input: { ms: 20 } }))
  return {
    responses: [
      { body: { events: anthropicEvents(blocks, { stopReason: 'tool_use' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'done' }]) } },
    ],
  }
}

test('agent: tools see the store active where agent.run() was called; concurrent runs do not mix', async () => {
  const executor = probingExecutor({ maxConcurrency: 20 })
  const servers = await Promise.all([0, 1, 2].map((n) => serveScript(toolTurnScript([`toolu_${n}a`, `toolu_${n}b`, `toolu_${n}c`]))))
  try {
    const stops = await Promise.all(
      servers.map((server, n) => {
        const client = new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1 })
        const agent = new Agent(client, { model: 'replay', tools: executor })
        return als.run(`agent-${n}`, () => agent.run('go').result())
      }),
    )
    stops.forEach((stop, n) => {
      assert.equal(stop.reason, 'end_turn')
      const results = stop.messages[2].content
      assert.deepEqual(
        results.map((r) => [r.tool_use_id, r.content]),
        ['a', 'b', 'c'].map((s) => [`toolu_${n}${s}`, `agent-${n}`]),
      )
    })
  } finally {
    await Promise.all(servers.map((server) => server.close()))
  }
})

test('an enterWith inside a tool does not change the caller nor the calls started later', async () => {
  const ex = probingExecutor({ maxConcurrency: 1 }).tool({ name: 'enter' }, () => {
    als.enterWith('entered by a tool')
    return String(als.getStore())
  })
  const uses = [use('e', 'enter'), use('s', 'syncProbe'), use('a', 'asyncProbe'), use('t', 'timed')]
  await als.run('caller', async () => {
    const results = await ex.run(uses)
    assert.deepEqual(contents(results), ['entered by a tool', 'caller', 'caller', 'caller'])
    assert.equal(als.getStore(), 'caller')
    const again = await ex.run([use('s2', 'syncProbe'), use('a2', 'asyncProbe')])
    assert.deepEqual(contents(again), ['caller', 'caller'])
  })
})
