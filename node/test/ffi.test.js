'use strict'
// FFI safety: a Rust panic at any native entry point surfaces as a FerroloopError with code
// 'internal' (never a crash), and JS tools that throw, reject or never settle each give an
// is_error result under the executor's rules.

const test = require('node:test')
const assert = require('node:assert/strict')
const native = require('../index.js')
const ferroloop = require('..')

const { ToolExecutor } = ferroloop

/** Live instances of every native class, built while the boundary is disarmed. */
function instances() {
  const executor = new native.ToolExecutor({}, [{ name: 'noop' }])
  const client = new native.Client({ baseUrl: 'http://127.0.0.1:9', maxRetries: 0 })
  return {
    SseParser: new native.SseParser({}),
    StreamDecoder: new native.StreamDecoder({ provider: 'anthropic' }),
    ContextBudget: new native.ContextBudget({ window: 200000, maxOutputTokens: 8192 }),
    ContextTracker: new native.ContextTracker('claude'),
    TextEstimator: new native.TextEstimator('claude'),
    ToolExecutor: executor,
    Turn: executor.startTurn(() => {}),
    Client: client,
    EventStream: client.createJson('{}'),
    Agent: new native.Agent(client, { model: 'm' }, {}, [], [], () => {}, () => {}),
  }
}

// How to call each entry point with arguments that pass napi's own conversions (so that the
// call reaches the Rust body, where the armed panic fires).
const noop = () => {}
const calls = {
  _debugPanic: () => native._debugPanic('armed'),
  _debugAliveTasks: () => native._debugAliveTasks(),
  _debugExternalBytes: () => native._debugExternalBytes(),
  countTokens: () => native.countTokens('hello', 'o200k'),
  hasExactCounting: () => native.hasExactCounting(),
  estimateText: () => native.estimateText('hello', 'claude'),
  estimateBytes: () => native.estimateBytes(Buffer.from('hello'), 'claude'),
  estimateRequestJson: () => native.estimateRequestJson('{"messages": []}', 'claude'),
  estimateJson: () => native.estimateJson('[]', 'claude'),
  'SseParser.new': () => new native.SseParser({}),
  'SseParser.feedBatch': (o) => o.feedBatch(Buffer.from('data: x\n\n'), new Uint8Array(256)),
  'SseParser.takeOffsets': (o) => o.takeOffsets(new Uint8Array(64)),
  'SseParser.finish': (o) => o.finish(),
  'SseParser.droppedEvents': (o) => o.droppedEvents,
  'SseParser.bytesFed': (o) => o.bytesFed,
  'SseParser.lastEventId': (o) => o.lastEventId,
  'SseParser.retry': (o) => o.retry,
  'StreamDecoder.new': () => new native.StreamDecoder({ provider: 'anthropic' }),
  'StreamDecoder.feedJson': (o) => o.feedJson(Buffer.from('')),
  'StreamDecoder.feedBatch': (o) => o.feedBatch(Buffer.from(''), new Uint8Array(64)),
  'StreamDecoder.takeOffsets': (o) => o.takeOffsets(new Uint8Array(64)),
  'StreamDecoder.finishJson': (o) => o.finishJson(),
  'StreamDecoder.isComplete': (o) => o.isComplete,
  'StreamDecoder.messageJson': (o) => o.messageJson(),
  'StreamDecoder.takeErrorDetail': (o) => o.takeErrorDetail(),
  'ContextBudget.new': () => new native.ContextBudget({ window: 1000, maxOutputTokens: 100 }),
  'ContextBudget.autocompactThreshold': (o) => o.autocompactThreshold,
  'ContextBudget.blockingThreshold': (o) => o.blockingThreshold,
  'ContextBudget.effectiveWindow': (o) => o.effectiveWindow,
  'ContextBudget.maxOutputTokens': (o) => o.maxOutputTokens,
  'ContextBudget.warningThreshold': (o) => o.warningThreshold,
  'ContextBudget.window': (o) => o.window,
  'ContextBudget.percentLeft': (o) => o.percentLeft(10),
  'ContextBudget.state': (o) => o.state(10),
  'ContextTracker.new': () => new native.ContextTracker('claude'),
  'ContextTracker.bytesEstimated': (o) => o.bytesEstimated,
  'ContextTracker.correction': (o) => o.correction,
  'ContextTracker.correction=': (o) => {
    o.correction = 1
  },
  'ContextTracker.correctionFor': (o) => o.correctionFor('m'),
  'ContextTracker.length': (o) => o.length,
  'ContextTracker.model': (o) => o.model,
  'ContextTracker.model=': (o) => {
    o.model = 'm'
  },
  'ContextTracker.tokenizer': (o) => o.tokenizer,
  'ContextTracker.pushMessageJson': (o) => o.pushMessageJson('{"role": "user", "content": "x"}'),
  'ContextTracker.recordUsageJson': (o) => o.recordUsageJson('{"input_tokens": 1}', 0),
  'ContextTracker.replaceMessagesJson': (o) => o.replaceMessagesJson('[]'),
  'ContextTracker.setSystemJson': (o) => o.setSystemJson('"x"'),
  'ContextTracker.setToolsJson': (o) => o.setToolsJson('[]'),
  'ContextTracker.tokens': (o) => o.tokens(),
  'ContextTracker.truncate': (o) => o.truncate(0),
  'ToolExecutor.new': () => new native.ToolExecutor({}, []),
  'ToolExecutor.completeJson': (o) => o.completeJson('[]'),
  'ToolExecutor.startTurn': (o) => o.startTurn(noop),
  'Turn.submitJson': (o) => o.submitJson('[]'),
  'Turn.submit': (o) => o.submit(new Uint32Array(0), '', ''),
  'Turn.seal': (o) => o.seal(),
  'Turn.finish': (o) => o.finish(),
  'Turn.cancel': (o) => o.cancel(),
  'Turn.discard': (o) => o.discard(),
  'Turn.pollJson': (o) => o.pollJson(),
  'Turn.settle': (o) => o.settle(new Uint32Array(0), ''),
  'Turn.takeCalls': (o) => o.takeCalls(),
  'Turn.takeResultFlags': (o) => o.takeResultFlags(),
  'Turn.takeNeededTexts': (o) => o.takeNeededTexts(),
  'Turn.takeTextRequests': (o) => o.takeTextRequests(),
  'Turn.provideTexts': (o) => o.provideTexts(new Uint32Array(0), ''),
  'TextEstimator.new': () => new native.TextEstimator('claude'),
  'TextEstimator.feedText': (o) => o.feedText('some text\n'),
  'TextEstimator.feedBytes': (o) => o.feedBytes(Buffer.from('some text\n')),
  'TextEstimator.estimate': (o) => o.estimate(),
  'TextEstimator.estimateWith': (o) => o.estimateWith('\ud83d'),
  'Client.new': () => new native.Client({ baseUrl: 'http://127.0.0.1:9' }),
  'Client.baseUrl': (o) => o.baseUrl,
  'Client.provider': (o) => o.provider,
  'Client.streamJson': (o) => o.streamJson('{}'),
  'Client.createJson': (o) => o.createJson('{}'),
  'EventStream.setWaker': (o) => o.setWaker(() => {}),
  'EventStream.takeJson': (o) => o.takeJson(),
  'EventStream.reportMemory': (o) => o.reportMemory(),
  'EventStream.waitsOnlyOnHost': (o) => o.waitsOnlyOnHost(),
  'EventStream.abort': (o) => o.abort(),
  'Agent.new': (_o, all) => new native.Agent(all.Client, { model: 'm' }, {}, [], [], noop, noop),
  'Agent.decided': (o) => o.decided(0, false),
  'Agent.completeJson': (o) => o.completeJson('[]'),
  'Agent.drainToolsJson': (o) => o.drainToolsJson(),
  'Agent.runJson': (o) => o.runJson('[]'),
  'Agent.toolDefinitionsJson': (o) => o.toolDefinitionsJson(),
}

// Classes JavaScript cannot construct (napi-rs refuses `new` before any Rust runs): their
// instances come from a factory method (`startTurn`, `streamJson`, ...).
const FACTORY_MADE = new Set(['Turn', 'EventStream'])

/** Every native entry point: exported functions, constructors, methods, getters and setters. */
function entryPoints() {
  const out = []
  for (const [name, value] of Object.entries(native)) {
    if (typeof value !== 'function' || name === '_debugArmPanics') continue
    if (value.prototype === undefined || Object.getOwnPropertyNames(value.prototype).length <= 1) {
      out.push(name)
      continue
    }
    if (!FACTORY_MADE.has(name)) out.push(`${name}.new`)
    for (const member of Object.getOwnPropertyNames(value.prototype)) {
      if (member === 'constructor') continue
      const descriptor = Object.getOwnPropertyDescriptor(value.prototype, member)
      out.push(`${name}.${member}`)
      if (descriptor.set !== undefined) out.push(`${name}.${member}=`)
    }
  }
  return out
}

test('every native entry point is exercised by the armed-panic test', () => {
  const missing = entryPoints().filter((name) => !(name in calls))
  assert.deepEqual(missing, [], 'add these entry points to `calls`')
})

test('factory-made classes cannot be constructed from JavaScript', () => {
  for (const name of FACTORY_MADE) assert.throws(() => new native[name](), Error)
})

test('an armed panic at each native entry point becomes an InternalError, never a crash', async () => {
  const all = instances()
  const outcomes = {}
  native._debugArmPanics(true)
  try {
    for (const [name, call] of Object.entries(calls)) {
      const owner = all[name.split('.')[0]]
      try {
        const value = call(owner, all)
        if (value instanceof Promise) await value
        outcomes[name] = 'returned'
      } catch (err) {
        const out = ferroloop.toFerroloopError(err)
        outcomes[name] = out instanceof ferroloop.InternalError && out.code === 'internal' && /panicked/.test(out.message) ? 'internal' : String(err)
      }
    }
  } finally {
    native._debugArmPanics(false)
  }
  const wrong = Object.entries(outcomes).filter(([, outcome]) => outcome !== 'internal')
  assert.deepEqual(wrong, [])
  // The process and the objects are still usable.
  assert.equal(ferroloop.estimateTokens('hello world') > 0, true)
  assert.equal(all.ContextBudget.window, 200000)
})

test('through the public API, an armed panic is an InternalError', async () => {
  const client = new ferroloop.Client({ baseUrl: 'http://127.0.0.1:9' })
  ferroloop._debugArmPanics(true)
  try {
    assert.throws(() => new ferroloop.SseParser(), ferroloop.InternalError)
    assert.throws(() => client.stream({ model: 'm' }), ferroloop.InternalError)
    assert.throws(() => ferroloop.estimateTokens('x'), ferroloop.InternalError)
  } finally {
    ferroloop._debugArmPanics(false)
  }
})

test('JS tools that throw, reject, or never settle each give an is_error result', async () => {
  const executor = new ToolExecutor({ cleanupGraceMs: 50 })
    .tool({ name: 'throws' }, () => {
      throw new TypeError('thrown synchronously')
    })
    .tool({ name: 'rejects' }, async () => {
      throw new Error('rejected')
    })
    .tool({ name: 'rejects_non_error' }, () => Promise.reject(42))
    .tool({ name: 'never', timeoutMs: 30 }, () => new Promise(() => {}))
    .tool({ name: 'ok' }, () => 'fine')
  const results = await executor.run([
    { id: 't1', name: 'throws', input: {} },
    { id: 't2', name: 'rejects', input: {} },
    { id: 't3', name: 'rejects_non_error', input: {} },
    { id: 't4', name: 'never', input: {} },
    { id: 't5', name: 'ok', input: {} },
  ])
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error]),
    [
      ['t1', true],
      ['t2', true],
      ['t3', true],
      ['t4', true],
      ['t5', false],
    ],
  )
  assert.match(JSON.stringify(results[0].content), /thrown synchronously/)
  assert.match(JSON.stringify(results[1].content), /rejected/)
  assert.match(JSON.stringify(results[2].content), /42/)
  assert.match(JSON.stringify(results[3].content), /time/i)
})
