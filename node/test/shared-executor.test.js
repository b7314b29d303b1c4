'use strict'
// One ToolExecutor shared by several users at once: two agents built from it, an agent beside
// the executor's own run(), and a run still going when another tool is registered. An abort or
// a timeout reaches the call it was meant for, and only that one.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Client, ToolExecutor, Agent, AbortError } = require('../lib/index.js')
const { serveScript, anthropicEvents } = require('./replay.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * A tool that works `input.ms` milliseconds (default 400) unless its ctx.signal aborts first;
 * `log` records, per tool use id, `started`, `finished` or the abort reason's class name.
 */
function patientTool(log) {
  return (input, ctx) =>
    new Promise((resolve) => {
      log.set(ctx.toolUseId, 'started')
      const timer = setTimeout(() => {
        log.set(ctx.toolUseId, 'finished')
        resolve('work done')
      }, input.ms ?? 400)
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer)
        log.set(ctx.toolUseId, ctx.signal.reason.constructor.name)
        resolve('gave up')
      })
    })
}

/** Resolves once `log` has an entry for `id`. */
async function started(log, id) {
  while (!log.has(id)) await sleep(2)
}

const toolTurn = (id) => anthropicEvents([{ type: 'tool_use', id, name: 'work', input: {} }], { stopReason: 'tool_use' })
const endTurn = () => ({ body: { events: anthropicEvents([{ type: 'text', text: 'done' }]) } })

/** The tool_result of the run's history, by tool use id. */
function resultOf(stop, id) {
  const blocks = stop.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
  return blocks.find((b) => b.type === 'tool_result' && b.tool_use_id === id)
}

test('two agents sharing one executor: aborting one run aborts its own tool, not the other agent\'s', async () => {
  const server = await serveScript({
    responses: [{ body: { events: toolTurn('tu_A') } }, { body: { events: toolTurn('tu_B') } }, endTurn()],
    when_exhausted: 'repeat_last',
  })
  try {
    const client = new Client({ baseUrl: server.url, apiKey: 'k', fromEnv: false, maxRetries: 0 })
    const log = new Map()
    const executor = new ToolExecutor().tool({ name: 'work' }, patientTool(log))
    const agentA = new Agent(client, { model: 'replay', tools: executor })
    const agentB = new Agent(client, { model: 'replay', tools: executor })
    const controller = new AbortController()
    const runA = agentA.run('a', { signal: controller.signal })
    const doneA = (async () => {
      for await (const _ of runA);
    })()
    await started(log, 'tu_A')
    const runB = agentB.run('b')
    const doneB = (async () => {
      for await (const _ of runB);
    })()
    await started(log, 'tu_B')
    controller.abort()
    await Promise.all([doneA, doneB])
    const [stopA, stopB] = await Promise.all([runA.result(), runB.result()])
    assert.equal(log.get('tu_A'), 'AbortError', "run A's tool sees its run's abort")
    assert.equal(log.get('tu_B'), 'finished', "agent B's tool is not aborted")
    assert.equal(stopA.reason, 'aborted')
    assert.equal(stopB.reason, 'end_turn')
    assert.equal(resultOf(stopB, 'tu_B').content, 'work done')
  } finally {
    await server.close()
  }
})

test("a timeout of executor.run()'s call times out that call, not an agent's call on the same executor", async () => {
  const server = await serveScript({ responses: [{ body: { events: toolTurn('tu_agent') } }, endTurn()], when_exhausted: 'repeat_last' })
  try {
    const client = new Client({ baseUrl: server.url, apiKey: 'k', fromEnv: false, maxRetries: 0 })
    const log = new Map()
    const executor = new ToolExecutor({ cleanupGraceMs: 20 }).tool({ name: 'work', timeoutMs: 150 }, patientTool(log))
    const direct = executor.run([{ type: 'tool_use', id: 'tu_direct', name: 'work', input: { ms: 300 } }])
    await started(log, 'tu_direct')
    const run = new Agent(client, { model: 'replay', tools: executor }).run('go')
    for await (const _ of run);
    const results = await direct
    const stop = await run.result()
    assert.equal(log.get('tu_direct'), 'TimeoutError', "the run's call sees its own timeout")
    assert.equal(results[0].is_error, true)
    assert.match(String(results[0].content), /timed out/)
    // The agent's call started about 20 ms later: its own 150 ms timeout cuts its 400 ms of work.
    assert.equal(log.get('tu_agent'), 'TimeoutError')
    assert.equal(resultOf(stop, 'tu_agent').is_error, true)
  } finally {
    await server.close()
  }
})

test('a run still going when another tool is registered keeps its own calls: aborting it reaches only them', async () => {
  const log = new Map()
  const executor = new ToolExecutor({ cleanupGraceMs: 20 }).tool({ name: 'work', timeoutMs: 10_000 }, patientTool(log))
  const controller = new AbortController()
  const first = executor.run([{ type: 'tool_use', id: 'first', name: 'work', input: {} }], { signal: controller.signal })
  await started(log, 'first')
  // Registering rebuilds the native executor the next run starts on.
  executor.tool({ name: 'other' }, () => 'x')
  const second = executor.run([{ type: 'tool_use', id: 'second', name: 'work', input: {} }])
  await started(log, 'second')
  controller.abort()
  await assert.rejects(first, AbortError)
  const results = await second
  assert.equal(log.get('first'), 'AbortError')
  assert.equal(log.get('second'), 'finished')
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.content, r.is_error]),
    [['second', 'work done', false]],
  )
})
