'use strict'
// Long use without growth: what a long-running server leaves behind after thousands of runs,
// streams and tool calls it abandons (never read, aborted, timed out). Each test counts
// something (live objects through WeakRef with forced collection, listeners on a signal)
// rather than measuring memory.

const test = require('node:test')
const assert = require('node:assert/strict')
const { AsyncLocalStorage } = require('node:async_hooks')
const { getEventListeners } = require('node:events')
const v8 = require('node:v8')
const vm = require('node:vm')
const ferroloop = require('..')
const { serveScript, anthropicEvents } = require('./replay.js')

const { Agent, Client, ToolExecutor } = ferroloop

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')

/**
 * One collection round: a turn of the event loop, then a forced collection. The first rounds
 * are `setImmediate` turns (what most releases need); later ones wait 10 ms, because some
 * releases wait for a message from a native thread (a timer firing, an abort queued to JS),
 * which a loaded machine delivers late.
 */
async function collectRound(i) {
  await new Promise((resolve) => (i < 40 ? setImmediate(resolve) : setTimeout(resolve, 10)))
  gc()
}

/** Collects until every WeakRef in `refs` is empty (or gives up after about 3 s). */
async function collectAll(refs, rounds = 340) {
  for (let i = 0; i < rounds && refs.some((ref) => ref.deref() !== undefined); i++) {
    await collectRound(i)
  }
  return refs.filter((ref) => ref.deref() !== undefined).length
}

/** Collects until `check()` holds (or gives up after about 3 s). */
async function collectUntil(check, rounds = 340) {
  for (let i = 0; i < rounds && !check(); i++) {
    await collectRound(i)
  }
}

const hello = { body: { events: anthropicEvents([{ type: 'text', text: 'Hello' }]) } }

async function withServer(fn) {
  const server = await serveScript({ responses: [hello], when_exhausted: 'repeat_last' })
  try {
    return await fn(new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1 }))
  } finally {
    await server.close()
  }
}

/**
 * Calls `start()` `n` times, each inside `AsyncLocalStorage.run` with a store of its own, and
 * drops what it returns; WeakRefs to the stores. (Made in a plain function: a suspended async
 * function may keep its last locals.)
 */
function abandonInContext(n, start) {
  const als = new AsyncLocalStorage()
  const stores = []
  for (let i = 0; i < n; i++) {
    const store = { request: i }
    stores.push(new WeakRef(store))
    als.run(store, () => {
      start()
    })
  }
  return stores
}

test('a client stream that is never read is released, with its native stream', async () => {
  // The waker handed to the native stream closed over the constructor's scope, which held the
  // native stream: a cycle through the thread-safe function (a root), so a stream nobody read
  // to its end stayed alive (its native side, buffered events and async context) forever.
  await withServer(async (client) => {
    const request = { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }
    const stores = abandonInContext(20, () => client.stream(request))
    assert.equal(await collectAll(stores), 0, 'the abandoned streams were released')
    // Left after one event: the same.
    const left = abandonInContext(5, async () => {
      for await (const _ of client.stream(request)) break
    })
    assert.equal(await collectAll(left), 0, 'the streams left early were released')
  })
})

test('an agent run that is never read forgets its async context once it is collected', async () => {
  // The agent kept, per run, the async context the run was started in until the run's stop
  // event was read: a run started and dropped (a request handler that bailed out) kept it for
  // the agent's lifetime, and with it every AsyncLocalStorage value active at `run()`.
  await withServer(async (client) => {
    const agent = new Agent(client, { model: 'm' })
    const stores = abandonInContext(20, () => agent.run('Hi'))
    assert.equal(await collectAll(stores), 0, 'the async context of every abandoned run was released')
    // The agent still works.
    const stop = await agent.run('Hi').result()
    assert.equal(stop.reason, 'end_turn')
  })
})

test('abandoned agent runs and streams leave no listener on a long-lived AbortSignal', async () => {
  // A server passes one shutdown signal to every run. A run or stream nobody read to its end
  // kept its listeners on it (and, through them, the run, its native stream and its buffered
  // events) for as long as the signal lived.
  await withServer(async (client) => {
    const agent = new Agent(client, { model: 'm' })
    const shutdown = new AbortController()
    const runs = []
    for (let i = 0; i < 20; i++) {
      runs.push(new WeakRef(agent.run('Hi', { signal: shutdown.signal })))
      runs.push(new WeakRef(client.stream({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }, { signal: shutdown.signal })))
    }
    assert.equal(await collectAll(runs), 0, 'the abandoned runs and streams were collected')
    await collectUntil(() => getEventListeners(shutdown.signal, 'abort').length === 0)
    assert.equal(getEventListeners(shutdown.signal, 'abort').length, 0, 'no listener is left on the signal')
    // A run read to its end leaves none either.
    await agent.run('Hi', { signal: shutdown.signal }).result()
    assert.equal(getEventListeners(shutdown.signal, 'abort').length, 0)
  })
})

/** Starts `n` runs, aborts them and never reads them; WeakRefs to the abort reasons. */
function abortUnread(agent, n) {
  const reasons = []
  for (let i = 0; i < n; i++) {
    const controller = new AbortController()
    agent.run('Hi', { signal: controller.signal })
    const reason = new Error(`cancelled ${i}`)
    reasons.push(new WeakRef(reason))
    controller.abort(reason)
  }
  return reasons
}

test('an aborted agent run that is never read forgets why it was aborted once collected', async () => {
  await withServer(async (client) => {
    const agent = new Agent(client, { model: 'm' })
    const reasons = abortUnread(agent, 20)
    assert.equal(await collectAll(reasons), 0, 'the abort reasons of the abandoned runs were released')
  })
})

test('a timed-out tool call that never settles is not kept by its executor', async () => {
  // The tool host kept the context of every call until the tool settled: a tool that hangs
  // (and ignores ctx.signal) was timed out by the executor, yet its ctx stayed in the host's
  // table of running calls for the executor's lifetime, one entry per timed-out call.
  const executor = new ToolExecutor({ cleanupGraceMs: 1 })
  const contexts = []
  executor.tool({ name: 'hang', timeoutMs: 5, concurrencySafe: true }, (input, ctx) => {
    contexts.push(new WeakRef(ctx))
    return new Promise(() => {})
  })
  const uses = Array.from({ length: 20 }, (_, i) => ({ type: 'tool_use', id: `t${i}`, name: 'hang', input: {} }))
  const results = await executor.run(uses)
  assert.equal(results.length, 20)
  assert.ok(results.every((r) => r.is_error && /timed out/.test(r.content)))
  assert.equal(contexts.length, 20)
  assert.equal(await collectAll(contexts), 0, 'the contexts of the timed-out calls were released')
})

/** Starts `n` turns with one call each and drops them unsealed; WeakRefs to the turns. */
function abandonTurns(executor, n) {
  const turns = []
  for (let i = 0; i < n; i++) {
    const turn = executor.turn()
    turn.submit({ type: 'tool_use', id: `t${i}`, name: 'quick', input: {} })
    turns.push(new WeakRef(turn))
  }
  return turns
}

test('a streaming turn dropped before it was sealed is collected', async () => {
  // A host whose model stream failed mid-turn drops the turn without sealing it. The turn's
  // wake function (a root while the native turn lives) closed over the turn, and an unsealed
  // turn never ends: every such turn stayed alive, results and all, for the process's life.
  const executor = new ToolExecutor()
  executor.tool({ name: 'quick', concurrencySafe: true }, async () => 'ok')
  const turns = abandonTurns(executor, 20)
  assert.equal(await collectAll(turns), 0, 'the abandoned turns were collected')
  // Turns that are awaited are kept alive by the wait, even if only the wait refers to them.
  const results = await Promise.all(
    Array.from({ length: 5 }, (_, i) => executor.run([{ type: 'tool_use', id: `r${i}`, name: 'quick', input: {} }])),
  )
  assert.deepEqual(results.map((r) => r[0].content), ['ok', 'ok', 'ok', 'ok', 'ok'])
})

/**
 * Starts `n` turns with one call each of `name` and drops them unsealed; WeakRefs to the
 * turns. `contexts` gets each call's ctx (a tool may keep its ctx; it must not keep the turn).
 */
function abandonRunningTurns(executor, n, name) {
  const turns = []
  for (let i = 0; i < n; i++) {
    const turn = executor.turn()
    turn.submit({ type: 'tool_use', id: `t${i}`, name, input: {} })
    turns.push(new WeakRef(turn))
  }
  return turns
}

test("a dropped unfinished turn is collected, and its collection aborts its running calls' ctx.signal", async () => {
  // The README's promise: an unfinished turn nobody refers to is garbage-collected, which
  // cancels its work. Collected it was, but its running calls never saw their signal fire (a
  // tool waiting on it waited forever); a call whose tool kept its ctx kept the turn alive.
  const executor = new ToolExecutor({ cleanupGraceMs: 1 })
  const reasons = []
  const contexts = []
  executor.tool({ name: 'wait', concurrencySafe: true }, (input, ctx) => {
    const signal = ctx.signal
    return new Promise((resolve) => {
      signal.addEventListener('abort', () => {
        reasons.push(signal.reason)
        resolve('stopped')
      })
    })
  })
  // Reads its signal only once the turn is gone.
  executor.tool({ name: 'keep', concurrencySafe: true }, (input, ctx) => {
    contexts.push(ctx)
    return new Promise(() => {})
  })
  const turns = abandonRunningTurns(executor, 20, 'wait')
  const kept = abandonRunningTurns(executor, 5, 'keep')
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(await collectAll([...turns, ...kept]), 0, 'the dropped turns were collected')
  await collectUntil(() => reasons.length === 20)
  assert.equal(reasons.length, 20, 'every running call saw its signal abort')
  assert.ok(reasons.every((reason) => reason.name === 'AbortError' && /garbage-collected/.test(reason.cause?.message)))
  assert.equal(contexts.length, 5)
  assert.ok(contexts.every((ctx) => ctx.signal.aborted && ctx.signal.reason.name === 'AbortError'), 'a signal read after the collection is aborted')
})

/** An agent whose tools refer back to it (a tool that starts a sub-run); a WeakRef to it. */
function selfReferringAgent() {
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9' })
  const executor = new ToolExecutor()
  const holder = {}
  executor.tool({ name: 'delegate' }, (input) => holder.agent.run(String(input.task)).result())
  executor.tool({ name: 'check', concurrencySafe: () => holder.agent !== undefined }, () => 'ok')
  holder.agent = new Agent(client, { model: 'm', tools: executor })
  return new WeakRef(holder.agent)
}

test('an agent whose tools refer back to it is collected', async () => {
  // The native agent holds its wake and decide functions as roots for its lifetime; they
  // closed over the constructor's scope, which held the tool host (the tool functions and
  // safety predicates): a tool reaching the agent made the agent a root of itself, never
  // collected.
  const agents = Array.from({ length: 10 }, selfReferringAgent)
  assert.equal(await collectAll(agents), 0, 'the agents were collected')
})

test('a dropped turn still times out its running calls (their signals fire)', async () => {
  // A turn collected while one of its calls with a timeout ran would take that call's timeout
  // with it: the call, never aborted, stayed in the tool host until it settled, if ever.
  const executor = new ToolExecutor({ cleanupGraceMs: 1 })
  const reasons = []
  executor.tool({ name: 'wait', timeoutMs: 30 }, (input, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        reasons.push(ctx.signal.reason)
        resolve('stopped')
      })
    })
  })
  const dropTurn = () => {
    const turn = executor.turn()
    turn.submit({ type: 'tool_use', id: 'w', name: 'wait', input: {} })
  }
  dropTurn()
  for (let i = 0; i < 50 && reasons.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    gc()
  }
  assert.equal(reasons.length, 1, 'the call was aborted')
  assert.equal(reasons[0].name, 'TimeoutError')
})

const native = require('../index.js')

/** Starts `n` turns with one call of `name` each and drops them unsealed. */
function dropTurns(executor, n, name) {
  for (let i = 0; i < n; i++) executor.turn().submit({ type: 'tool_use', id: `d${i}`, name, input: {} })
}

test('a call whose tool never settles leaves no native task once its promise is collected', async () => {
  // Past its cleanup grace, a call whose tool ignores its signal waits for its answer on a task
  // of its own (for its cleanup). A JS tool's promise nobody can settle any more never
  // answered: each such call kept that task, its slot in the tool queues and (for a dropped
  // turn) the turn's wake function, a root, for the process's life.
  const before = native._debugAliveTasks()
  const executor = new ToolExecutor({ cleanupGraceMs: 1 })
  executor.tool({ name: 'hang', timeoutMs: 5, concurrencySafe: true }, () => new Promise(() => {}))
  const uses = Array.from({ length: 20 }, (_, i) => ({ type: 'tool_use', id: `t${i}`, name: 'hang', input: {} }))
  const results = await executor.run(uses)
  assert.ok(results.every((r) => r.is_error && /timed out/.test(r.content)), 'the calls still time out')
  dropTurns(executor, 20, 'hang')
  await collectUntil(() => native._debugAliveTasks() <= before)
  assert.equal(native._debugAliveTasks(), before, 'no task is left waiting for an answer')
})

/** The SSE bytes of an Anthropic stream whose one text block has `deltas` deltas of 40 characters. */
function textStream(deltas) {
  const parts = [
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_x","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n',
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  ]
  const delta = `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${'abcdefghij'.repeat(4)}"}}\n\n`
  for (let i = 0; i < deltas; i++) parts.push(delta)
  parts.push('event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n')
  parts.push('event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}\n\n')
  parts.push('event: message_stop\ndata: {"type":"message_stop"}\n\n')
  return Buffer.from(parts.join(''))
}

test('a StreamDecoder reports the memory its message holds to V8, and takes it all back when collected', async () => {
  // V8 did not know what a decoder kept (the message grows with its stream, its wrapper stays a
  // few words): a server's dropped decoders, in the old generation, waited for a full GC that
  // nothing V8 saw asked for, and RSS reached hundreds of MB (benches/node/churn.mjs).
  const { StreamDecoder } = ferroloop
  await collectUntil(() => false, 3)
  const start = native._debugExternalBytes()
  const stream = textStream(5000) // about 700 KB: a long reply
  const live = new StreamDecoder({ provider: 'anthropic' })
  const empty = native._debugExternalBytes() - start
  assert.ok(empty > 0, 'a new decoder reports its own size')
  for (let i = 0; i < stream.length; i += 1460) live.feed(stream.subarray(i, i + 1460))
  const fed = native._debugExternalBytes() - start
  // A third of the bytes fed, reported in steps of 4 KiB.
  assert.ok(Math.abs(fed - empty - stream.length / 3) <= 4096, `${fed - empty} bytes reported for ${stream.length} fed`)
  live.finish()

  const refs = []
  ;(() => {
    for (let i = 0; i < 50; i++) {
      const decoder = new StreamDecoder({ provider: 'anthropic', events: i % 2 === 0 })
      decoder.feed(stream)
      decoder.finish()
      refs.push(new WeakRef(decoder))
    }
  })()
  assert.ok(native._debugExternalBytes() - start >= fed + 50 * (stream.length / 3 - 4096), 'every live decoder is counted')
  assert.equal(await collectAll(refs), 0, 'the decoders were collected')
  await collectUntil(() => native._debugExternalBytes() - start <= fed)
  assert.equal(native._debugExternalBytes() - start, fed, 'the collected decoders took back what they reported')
  assert.ok(live.message().content[0].text.length > 0)
  // `live` is dropped here: its share goes too.
})

test('the bytes reported to V8 return to their start once every decoder is collected', async () => {
  // Runs after the test above: its live decoder is collectable now.
  const { StreamDecoder } = ferroloop
  const refs = []
  ;(() => {
    for (let i = 0; i < 200; i++) {
      const decoder = new StreamDecoder({ provider: i % 2 ? 'anthropic' : 'openai-chat', events: false })
      refs.push(new WeakRef(decoder))
    }
  })()
  assert.equal(await collectAll(refs), 0, 'the decoders were collected')
  await collectUntil(() => native._debugExternalBytes() === 0)
  assert.equal(native._debugExternalBytes(), 0, 'nothing stays reported for a collected decoder')
})

/** Waits (turns of the event loop, no collection) until `check()` holds, or about 10 s. */
async function waitUntil(check, rounds = 1040) {
  for (let i = 0; i < rounds && !check(); i++) {
    await new Promise((resolve) => (i < 40 ? setImmediate(resolve) : setTimeout(resolve, 10)))
  }
}

/** A client, and an agent over it, whose every request gets `textStream(deltas)`. */
async function withLongReplies(deltas, fn) {
  const text = textStream(deltas).toString('utf8')
  const server = await serveScript({ responses: [{ headers: { 'content-type': 'text/event-stream' }, body: { text } }], when_exhausted: 'repeat_last' })
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1 })
    return await fn(client, new Agent(client, { model: 'm' }))
  } finally {
    await server.close()
  }
}

/** Starts `n` streams with `start()` and drops them unread; WeakRefs to them. */
function dropUnread(n, start) {
  const refs = []
  for (let i = 0; i < n; i++) refs.push(new WeakRef(start()))
  return refs
}

for (const [article, kind] of [['a', 'client stream'], ['an', 'agent run']]) {
  test(`${article} ${kind} reports the native memory it holds to V8 until it is read to its end or collected`, async () => {
    // A stream's items wait on the native side (its decoder's message, an agent run's history,
    // the events not yet taken) while its wrapper stays a few words: a server's streams left
    // unread or half read reached the old generation and waited for a full GC that nothing V8
    // saw asked for (churn.mjs client 65536 8192 64 none: 586 MB of RSS, 10 MB of heap).
    await withLongReplies(900, async (client, agent) => {
      const request = { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }
      const start = kind === 'client stream' ? () => client.stream(request) : () => agent.run('Hi')
      await collectUntil(() => false, 3)
      const before = native._debugExternalBytes()
      // 900 events of 40 characters wait unread: their JSON (about 80 KB) at least is counted.
      const live = start()
      await waitUntil(() => native._debugExternalBytes() - before >= 32 * 1024)
      const held = native._debugExternalBytes() - before
      assert.ok(held >= 32 * 1024, `an unread ${kind} reported ${held} bytes`)
      // Read to its end, its native side is gone while the object lives: so is the report.
      for await (const _ of live);
      await waitUntil(() => native._debugExternalBytes() === before)
      assert.equal(native._debugExternalBytes(), before, `a ${kind} read to its end holds nothing`)
      // Dropped unread: each reports what it holds, and takes it back when collected.
      const refs = dropUnread(10, start)
      await waitUntil(() => native._debugExternalBytes() - before >= 10 * 32 * 1024)
      assert.ok(native._debugExternalBytes() - before >= 10 * 32 * 1024, 'every unread stream is counted')
      assert.equal(await collectAll(refs), 0, `the ${kind}s were collected`)
      await collectUntil(() => native._debugExternalBytes() === before)
      assert.equal(native._debugExternalBytes(), before, `the collected ${kind}s took back what they reported`)
      assert.ok(live !== undefined)
    })
  })
}
