'use strict'
// Careless or hostile use of the addon: every case here once ended the process (an uncaught
// exception in a promise reaction), mixed one call's result into another's, threw a bare
// TypeError, or turned bad input into an `internal` error. Each must now be a typed error or a
// correct result.
const test = require('node:test')
const assert = require('node:assert/strict')

const { Agent, Client, ToolExecutor, ContextBudget, ContextTracker, TextEstimator, SseParser, StreamDecoder, estimateTokens, estimateRequest, InvalidArgumentError } = require('../lib/index.js')

const use = (id, name, input = {}) => ({ type: 'tool_use', id, name, input })

/** Tools that return or throw what a careless tool might, each with what its result must say. */
const HOSTILE = {
  // `String(err)` threw inside the rejection handler: an uncaught exception.
  throws_object_with_throwing_to_string: [
    async () => {
      throw { toString: () => { throw new Error('no text') } }
    },
    /cannot be converted to a string/,
  ],
  throws_null_prototype_object: [
    async () => {
      throw Object.create(null)
    },
    /cannot be converted to a string/,
  ],
  // A number as the content: its `.length` is undefined, so in a turn the settlement batch was
  // misaligned and this call's text ended up in the next call's result.
  throws_error_with_numeric_message: [
    async () => {
      const err = new Error('x')
      err.message = 12345
      throw err
    },
    /^Error: 12345$/,
  ],
  // Reading `then` threw outside any try: an uncaught exception.
  returns_object_whose_then_getter_throws: [
    () => ({
      get then() {
        throw new Error('then getter')
      },
    }),
    /then getter/,
  ],
  returns_hostile_proxy: [
    () =>
      new Proxy(
        {},
        {
          get() {
            throw new Error('proxy trap')
          },
          has() {
            throw new Error('proxy trap')
          },
          getPrototypeOf() {
            throw new Error('proxy trap')
          },
        },
      ),
    /proxy trap/,
  ],
  returns_thenable_whose_then_throws: [
    () => ({
      then() {
        throw new Error('then threw')
      },
    }),
    /then threw/,
  ],
  // `toJSON` making content blocks serialize to nothing: `undefined.length` threw.
  returns_blocks_without_json: [
    async () => {
      const blocks = [{ type: 'text', text: 'x' }]
      blocks.toJSON = () => undefined
      return { content: blocks }
    },
    /no JSON form/,
  ],
  throws_from_to_json_with_a_value_without_text: [
    async () => ({
      toJSON() {
        throw Object.create(null)
      },
    }),
    /cannot be converted to a string/,
  ],
}

function hostileExecutor() {
  const ex = new ToolExecutor()
  for (const [name, [fn]] of Object.entries(HOSTILE)) ex.tool({ name, concurrencySafe: true }, fn)
  ex.tool({ name: 'ok', concurrencySafe: true }, async () => 'the next result')
  // A thenable that settles three times: only its first outcome counts.
  ex.tool({ name: 'settles_thrice', concurrencySafe: true }, () => ({
    then(resolve, reject) {
      resolve('first')
      resolve('second')
      reject(new Error('third'))
    },
  }))
  return ex
}

function checkResults(results, name) {
  assert.equal(results.length, 2)
  assert.equal(results[0].tool_use_id, 'hostile')
  assert.equal(results[0].is_error, true, `${name}: ${JSON.stringify(results[0])}`)
  assert.equal(typeof results[0].content, 'string', name)
  assert.match(results[0].content, HOSTILE[name][1], name)
  // The call beside it is untouched.
  assert.deepEqual(results[1], { type: 'tool_result', tool_use_id: 'next', content: 'the next result', is_error: false }, name)
}

test('a tool that throws or returns anything gives an error result, never a crash (run)', async () => {
  const ex = hostileExecutor()
  for (const name of Object.keys(HOSTILE)) {
    checkResults(await ex.run([use('hostile', name), use('next', 'ok')]), name)
  }
})

test('a tool that throws or returns anything gives an error result, never a crash (turn)', async () => {
  const ex = hostileExecutor()
  for (const name of Object.keys(HOSTILE)) {
    const turn = ex.turn()
    turn.submit(use('hostile', name), use('next', 'ok'))
    turn.seal()
    checkResults(await turn.results(), name)
  }
})

test('a thenable that settles several times is answered by its first outcome', async () => {
  const ex = hostileExecutor()
  const expected = [
    { type: 'tool_result', tool_use_id: 'a', content: 'first', is_error: false },
    { type: 'tool_result', tool_use_id: 'b', content: 'the next result', is_error: false },
  ]
  assert.deepEqual(await ex.run([use('a', 'settles_thrice'), use('b', 'ok')]), expected)
  const turn = ex.turn()
  turn.submit(use('a', 'settles_thrice'), use('b', 'ok'))
  turn.seal()
  assert.deepEqual(await turn.results(), expected)
})

test('values JSON cannot carry are InvalidArgumentErrors, not bare TypeErrors', async () => {
  const cycle = {}
  cycle.self = cycle
  const tracker = new ContextTracker()
  const cases = {
    'estimateRequest bigint': () => estimateRequest({ messages: [{ role: 'user', content: 1n }] }),
    'estimateRequest cycle': () => estimateRequest(cycle),
    'pushMessage bigint': () => tracker.pushMessage({ role: 'user', content: 1n }),
    'pushMessage cycle': () => tracker.pushMessage(cycle),
    'replaceMessages cycle': () => tracker.replaceMessages([cycle]),
    'setSystem bigint': () => tracker.setSystem(1n),
    'setTools cycle': () => tracker.setTools([cycle]),
    'recordUsage bigint': () => tracker.recordUsage({ input_tokens: 1n }),
  }
  for (const [name, call] of Object.entries(cases)) {
    assert.throws(call, (err) => err instanceof InvalidArgumentError && err.code === 'invalid_argument' && /cannot be sent as JSON/.test(err.message), name)
  }
  // (A tool use's input JSON cannot carry is its call's is_error result: see below.)
  assert.throws(() => new ToolExecutor().tool({ name: 'bad_schema', schema: cycle }, async () => 'ok'), InvalidArgumentError)
})

test('a tool use whose input must cross as JSON and cannot gets an is_error result; the other calls still run', async () => {
  // With a schema (or for an unknown tool) the whole run() rejected and the batch's other
  // results were lost. Every tool_use gets its one tool_result, in a run and in a streaming
  // turn. A plain-object input to a tool without a schema never crosses (the tool gets it as
  // given, unencoded: the executor's fast path), so the same input runs that tool.
  const cycle = {}
  cycle.self = cycle
  const called = []
  const ex = new ToolExecutor()
    .tool({ name: 'plain', concurrencySafe: true }, (input) => { called.push(input); return 'ok' })
    .tool({ name: 'checked', concurrencySafe: true, schema: { type: 'object' } }, (input) => { called.push(input); return 'ok' })
  const good = use('good', 'plain', { nested: { deep: [1, 'two'] } })
  const after = use('after', 'checked', { x: 1 })
  const ok = (id) => ({ type: 'tool_result', tool_use_id: id, content: 'ok', is_error: false })
  const inputs = {
    bigint: [{ n: 1n }, /BigInt/],
    nested_bigint: [{ a: { n: [2n] } }, /BigInt/],
    cycle: [cycle, /circular/i],
    throwing_toJSON: [{ a: { toJSON() { throw new Error('no JSON here') } } }, /no JSON here/],
    // Validated as `{}` before (JSON.stringify's writing of a Map).
    map: [{ a: new Map([['k', 1]]) }, /a Map is not a JSON value/],
  }
  for (const [label, [input, reason]] of Object.entries(inputs)) {
    // Without a schema: the tool runs with the very object given.
    called.length = 0
    assert.deepEqual(await ex.run([good, use('bad', 'plain', input), after]), [ok('good'), ok('bad'), ok('after')], label)
    assert.equal(called[1], input, label)
    // With a schema: refused on its own.
    const check = (results) => {
      assert.deepEqual(results.map((r) => r.tool_use_id), ['good', 'bad', 'after'], label)
      assert.deepEqual([results[0], results[2]], [ok('good'), ok('after')], label)
      assert.equal(results[1].is_error, true, label)
      assert.match(results[1].content, /^Invalid input for tool 'checked': the input cannot be sent as JSON: /, label)
      assert.match(results[1].content, reason, label)
    }
    called.length = 0
    check(await ex.run([good, use('bad', 'checked', input), after]))
    assert.equal(called.length, 2, `${label}: the refused call's tool is not called`)
    const turn = ex.turn()
    turn.submit(good, use('bad', 'checked', input))
    turn.submit(after)
    turn.seal()
    const events = []
    for await (const event of turn) events.push(event)
    check(await turn.results())
    const refused = events.filter((e) => e.index === 1)
    assert.deepEqual(refused.map((e) => e.type), ['finished', 'result'], label)
    assert.deepEqual([refused[0].tool, refused[0].toolUseId, refused[0].status], ['checked', 'bad', 'rejected'])
    assert.equal(refused[1].result.content, (await turn.results())[1].content)
    // An unknown tool gets its usual result, whatever its input.
    const results = await ex.run([good, use('bad', 'nope', input), after])
    assert.deepEqual(results, [ok('good'), { type: 'tool_result', tool_use_id: 'bad', content: "Unknown tool 'nope'", is_error: true }, ok('after')], label)
  }
  // An input that is no plain object crosses for any tool, and is refused the same way.
  const odd = Object.assign(Object.create({ inherited: true }), { n: 3n })
  const results = await ex.run([use('bad', 'plain', odd)])
  assert.match(results[0].content, /^Invalid input for tool 'plain': the input cannot be sent as JSON: .*BigInt/)
})

test('a Set in a tool use\'s input is validated as the array of its items, as Python sends a set; the tool gets the input as given', async () => {
  // JSON.stringify wrote it {}: the schema saw an object ("expected array, got object") and
  // refused an input holding exactly what it asked for.
  const called = []
  const ex = new ToolExecutor().tool(
    { name: 'files', schema: { type: 'object', properties: { paths: { type: 'array', items: { type: 'string' }, minItems: 1 } }, required: ['paths'] } },
    (input) => {
      called.push(input)
      return [...input.paths].join(',')
    },
  )
  const input = { paths: new Set(['a.txt', 'b.txt']) }
  assert.deepEqual(await ex.run([use('t1', 'files', input)]), [{ type: 'tool_result', tool_use_id: 't1', content: 'a.txt,b.txt', is_error: false }])
  assert.equal(called[0], input)
  const refused = await ex.run([use('t2', 'files', { paths: new Set([1]) })])
  assert.equal(refused[0].is_error, true)
  assert.match(refused[0].content, /^Invalid input for tool 'files': input\.paths\[0\]: expected string/)
})

test('huge durations are invalid arguments, not internal errors', async () => {
  for (const ms of [Number.MAX_VALUE, 1e300, 1e23]) {
    assert.throws(() => new ToolExecutor({ defaultTimeoutMs: ms }), InvalidArgumentError, `defaultTimeoutMs ${ms}`)
    assert.throws(() => new ToolExecutor({ cleanupGraceMs: ms }), InvalidArgumentError, `cleanupGraceMs ${ms}`)
    assert.throws(() => new ToolExecutor().tool({ name: 't', timeoutMs: ms }, async () => 'ok'), InvalidArgumentError, `timeoutMs ${ms}`)
  }
  // The largest durations that fit still work (a timeout that never fires).
  const ex = new ToolExecutor().tool({ name: 't', timeoutMs: 1e18 }, async () => 'ok')
  assert.equal((await ex.run([use('a', 't')]))[0].content, 'ok')
})

test('a zero tool timeout is refused naming it, as the client\'s, Python\'s and C\'s are', () => {
  // It timed every call out at once, where 0 most likely meant "none".
  const named = (name) => (err) => err instanceof InvalidArgumentError && err.message.startsWith(`${name} must be at least 1 millisecond, got 0:`)
  assert.throws(() => new ToolExecutor({ defaultTimeoutMs: 0 }), named('defaultTimeoutMs'))
  assert.throws(() => new ToolExecutor().tool({ name: 't', timeoutMs: 0 }, async () => 'ok'), named('timeoutMs'))
  // A zero grace is no wait, and passes.
  new ToolExecutor({ cleanupGraceMs: 0 })
})

test('a timeout under 1 millisecond is refused saying "at least 1 millisecond", as 0 is', async () => {
  // 1e-9 was refused as "must be above 0 milliseconds, got 0.000000001", and 0.5 was taken and
  // timed an instant tool out "after 0ms" (a JS call takes longer; C counts whole
  // milliseconds).
  const refused = (name, ms) => (err) =>
    err instanceof InvalidArgumentError && err.code === 'invalid_argument' &&
    // (The number as Rust prints it: 1e-9 is 0.000000001.)
    err.message.startsWith(`${name} must be at least 1 millisecond, got `)
  for (const ms of [1e-9, 0.0001, 0.5, 0.999, -5]) {
    assert.throws(() => new ToolExecutor({ defaultTimeoutMs: ms }), refused('defaultTimeoutMs', ms), `defaultTimeoutMs ${ms}`)
    assert.throws(() => new ToolExecutor().tool({ name: 't', timeoutMs: ms }, async () => 'ok'), refused('timeoutMs', ms), `timeoutMs ${ms}`)
  }
  // 1 ms and fractions above it are taken (run with a fraction long enough that a loaded
  // machine cannot time the call out).
  new ToolExecutor({ defaultTimeoutMs: 1 }).tool({ name: 'short', timeoutMs: 1.5 }, async () => 'ok')
  const ex = new ToolExecutor({ defaultTimeoutMs: 1 }).tool({ name: 't', timeoutMs: 60_000.5 }, async () => 'ok')
  assert.equal((await ex.run([use('a', 't')]))[0].content, 'ok')
})

test('every refused maxConcurrency names the same range, from 1', () => {
  // 0 said "from 1 to 4294967295" but -1, 1.5 and Infinity "from 0 to 4294967295".
  for (const [n, shown] of [[0, '0'], [-1, '-1'], [1.5, '1.5'], [Infinity, 'Infinity'], [1e12, '1000000000000']]) {
    assert.throws(() => new ToolExecutor({ maxConcurrency: n }), (err) =>
      err instanceof InvalidArgumentError &&
      err.message === `maxConcurrency must be a whole number from 1 to ${2 ** 32 - 1}, got ${shown}`, `maxConcurrency ${n}`)
  }
  new ToolExecutor({ maxConcurrency: 1 })
})

test('a tool without a name is refused by the core registry, as in Python and C', () => {
  const refusedEmpty = (err) =>
    err instanceof InvalidArgumentError && err.message === 'a tool name must not be empty'
  const ex = new ToolExecutor()
  assert.throws(() => ex.tool({ name: '' }, async () => 'ok'), refusedEmpty)
  assert.throws(() => ex.tool({ name: 7 }, async () => 'ok'), (err) =>
    err instanceof InvalidArgumentError && err.message === 'tool(spec, fn): spec.name must be a string')
  assert.deepEqual(ex.toolNames, [])
})

test('maxConcurrency 0 and an empty spillDir are refused naming them, as Python\'s and C\'s are', () => {
  // The core's ExecutorConfig.check refuses both; an empty spillDir was taken here (and in
  // Python) while C refused it, and had no directory to spill into.
  assert.throws(() => new ToolExecutor({ maxConcurrency: 0 }), (err) =>
    err instanceof InvalidArgumentError && err.message === `maxConcurrency must be a whole number from 1 to ${2 ** 32 - 1}, got 0`)
  assert.throws(() => new ToolExecutor({ spillDir: '' }), (err) =>
    err instanceof InvalidArgumentError && err.message.startsWith('spillDir must not be empty'))
  // '.' is a directory (the current one), as any relative path.
  new ToolExecutor({ spillDir: '.', maxConcurrency: 1 })
})

test('absurd usage counts saturate instead of an internal error', () => {
  const tracker = new ContextTracker()
  tracker.pushMessage({ role: 'user', content: 'hi' })
  // 1e19 is a u64 in JSON; the sum of two is not.
  tracker.recordUsage({ input_tokens: 1e19, output_tokens: 1e19 })
  assert.deepEqual(tracker.tokens(), { tokens: 2 ** 64, method: 'exact' })
  tracker.pushMessage({ role: 'user', content: 'more' })
  assert.deepEqual(tracker.tokens(), { tokens: 2 ** 64, method: 'usage+estimate' })
})

test('counts that are negative, fractional or past 2^32 are invalid arguments, not wrapped', async () => {
  // These crossed as u32, converted as JavaScript's ToUint32 does: -1 became 4,294,967,295.
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9' })
  for (const n of [-1, 1.5, 2 ** 32, Infinity]) {
    assert.throws(() => new ToolExecutor({ maxConcurrency: n }), InvalidArgumentError, `maxConcurrency ${n}`)
    assert.throws(() => new Client({ apiKey: 'k', maxRetries: n }), InvalidArgumentError, `maxRetries ${n}`)
    for (const option of ['maxTurns', 'maxContinuations']) {
      assert.throws(() => new Agent(client, { model: 'm', [option]: n }), InvalidArgumentError, `${option} ${n}`)
    }
  }
  // Token counts cross as u64: a value past it was clamped to 2^64 - 1 without a word.
  for (const n of [-1, 1.5, 2 ** 64, 1e300, Infinity]) {
    // A count of tool results is one too, as in Python and C (it crossed as u32: 2^32 was refused).
    for (const option of ['maxTokens', 'tokenBudget', 'escalatedMaxTokens', 'keepRecentToolResults']) {
      assert.throws(
        () => new Agent(client, { model: 'm', [option]: n }),
        (err) => err instanceof InvalidArgumentError && err.message.startsWith(`${option} must be`),
        `${option} ${n}`,
      )
    }
  }
  new Agent(client, { model: 'm', maxTokens: 2 ** 63, tokenBudget: Number.MAX_SAFE_INTEGER, escalatedMaxTokens: 0, keepRecentToolResults: 2 ** 32 })
  assert.throws(() => new ToolExecutor({ maxConcurrency: 0 }), /maxConcurrency must be a whole number from 1/)
  // The valid extremes still work.
  const ex = new ToolExecutor({ maxConcurrency: 2 ** 32 - 1 }).tool({ name: 't', concurrencySafe: true }, async () => 'ok')
  assert.equal((await ex.run([use('a', 't'), use('b', 't')])).length, 2)
  new Client({ apiKey: 'k', maxRetries: 0 })
  new Agent(client, { model: 'm', maxTurns: 0, maxContinuations: 0, keepRecentToolResults: 0 })
})

test('null options are invalid arguments, not a destructuring TypeError', async () => {
  const ex = new ToolExecutor().tool({ name: 't' }, async () => 'ok')
  await assert.rejects(ex.run([use('a', 't')], null), InvalidArgumentError)
  await assert.rejects(ex.run([use('a', 't')], 'signal'), InvalidArgumentError)
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9' })
  assert.throws(() => client.stream({ model: 'm', messages: [] }, null), InvalidArgumentError)
  await assert.rejects(client.create({ model: 'm', messages: [] }, null), InvalidArgumentError)
  assert.throws(() => new Agent(client, { model: 'm' }).run('hi', null), InvalidArgumentError)
  // Absent options still mean none.
  assert.equal((await ex.run([use('a', 't')]))[0].content, 'ok')
})

test('unknown option keys are InvalidArgumentErrors naming them, as Python (TypeError) and C refuse them', async () => {
  // They were ignored: `new Client({ timeoutMs: 5000 })` ran with the 600 s default.
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false })
  const cases = [
    ['Client', 'timeoutMs', () => new Client({ fromEnv: false, timeoutMs: 5000 })],
    ['Client', 'maxRetry', () => new Client({ fromEnv: false, maxRetry: 2 })],
    ['Client timeouts', 'total', () => new Client({ fromEnv: false, timeouts: { total: 5000 } })],
    ['Agent', 'maxTurn', () => new Agent(client, { model: 'm', maxTurn: 3 })],
    ['Agent', 'max_tokens', () => new Agent(client, { model: 'm', max_tokens: 3 })],
    ['stream', 'signa', () => client.stream({ model: 'm' }, { signa: undefined })],
    ['run', 'history', () => new Agent(client, { model: 'm' }).run('hi', { history: [] })],
  ]
  for (const [what, key, call] of cases) {
    assert.throws(
      call,
      (err) => err instanceof InvalidArgumentError && err.message.includes(what) && err.message.includes(`"${key}"`),
      `${what} ${key}`,
    )
  }
  await assert.rejects(client.create({ model: 'm' }, { sigal: undefined }), (err) => err instanceof InvalidArgumentError && err.message.includes('"sigal"'))
  // Keys whose value is undefined count as absent, as do nulls, in every options object.
  new Client({ fromEnv: false, apiKey: undefined, maxRetries: null, timeouts: null, headers: null, provider: null })
  new Client({ fromEnv: false, timeouts: { totalMs: null, idleMs: undefined } })
  new Agent(client, { model: 'm', maxTurns: null, system: undefined, extra: null, promptCaching: null, tokenizer: null })
})

test('unknown keys in the other option objects are InvalidArgumentErrors naming the key and the object', async () => {
  // They were ignored: `new ToolExecutor({ maxConcurency: 2 })` ran with the default 10.
  const ex = new ToolExecutor().tool({ name: 't' }, async () => 'ok')
  const cases = [
    ['ToolExecutor', 'maxConcurency', () => new ToolExecutor({ maxConcurency: 2 })],
    ['ToolExecutor', 'timeoutMs', () => new ToolExecutor({ timeoutMs: 5 })],
    ['tool t2', 'timeout', () => new ToolExecutor().tool({ name: 't2', timeout: 5 }, async () => 'ok')],
    ['tool t2', 'concurrency_safe', () => new ToolExecutor().tool({ name: 't2', concurrency_safe: true }, async () => 'ok')],
    ['turn', 'abortSignal', () => ex.turn({ abortSignal: new AbortController().signal })],
    ['StreamDecoder', 'event', () => new StreamDecoder({ provider: 'anthropic', event: false })],
    ['SseParser', 'maxEventByte', () => new SseParser({ maxEventByte: 5 })],
    ['ContextBudget', 'maxOutput', () => new ContextBudget({ window: 200000, maxOutputTokens: 1000, maxOutput: 5 })],
    ['ContextTracker', 'tokenizr', () => new ContextTracker({ tokenizr: 'o200k' })],
    ['TextEstimator', 'family', () => new TextEstimator({ family: 'o200k' })],
    ['estimateTokens', 'tokeniser', () => estimateTokens('x', { tokeniser: 'o200k' })],
    ['estimateRequest', 'model', () => estimateRequest({ messages: [] }, { model: 'm' })],
  ]
  for (const [what, key, call] of cases) {
    assert.throws(
      call,
      (err) => err instanceof InvalidArgumentError && err.message.startsWith(`${what}: `) && err.message.includes(`"${key}"`),
      `${what} ${key}`,
    )
  }
  await assert.rejects(ex.run([use('a', 't')], { sigal: undefined }), (err) => err instanceof InvalidArgumentError && err.message.startsWith('run: ') && err.message.includes('"sigal"'))
  // Keys whose value is null or undefined count as absent.
  const absent = new ToolExecutor({ maxConcurrency: null, defaultTimeoutMs: undefined, cleanupGraceMs: null, defaultMaxResultChars: null, turnBudgetChars: null, spillDir: null })
  absent.tool({ name: 't', description: null, concurrencySafe: null, timeoutMs: null, maxResultChars: null, schema: null, cancelsSiblingsOnError: null }, async () => 'ok')
  assert.equal((await absent.run([use('a', 't')], { signal: null }))[0].content, 'ok')
  assert.equal(absent.turn(undefined) !== undefined, true)
  new StreamDecoder({ provider: 'anthropic', events: null })
  new SseParser({ maxEventBytes: null })
  const budget = new ContextBudget({ window: 200000, maxOutputTokens: 1000, outputReserveCap: null, autocompactBuffer: null, warningBuffer: null, blockingBuffer: null, autocompactPercent: null, model: null })
  assert.equal(budget.autocompactThreshold, new ContextBudget({ window: 200000, maxOutputTokens: 1000 }).autocompactThreshold)
  const undefinedOptions = new ContextBudget({ window: 200000, maxOutputTokens: 1000, autocompactBuffer: undefined, model: undefined })
  assert.equal(undefinedOptions.autocompactThreshold, budget.autocompactThreshold)
  assert.equal(new ContextBudget({ model: 'claude-sonnet-4', window: undefined }).window, new ContextBudget({ model: 'claude-sonnet-4' }).window)
  new SseParser({ maxEventBytes: undefined })
  assert.equal(new ContextTracker({ tokenizer: null }).tokenizer, 'claude')
  new TextEstimator({ tokenizer: null })
  assert.equal(estimateTokens('hello', { tokenizer: null }), estimateTokens('hello'))
  assert.deepEqual(estimateRequest({ messages: [] }, { tokenizer: undefined }), estimateRequest({ messages: [] }))
})

test('option values of the wrong type, or counts too large to hold, are InvalidArgumentErrors naming the option', () => {
  const cases = [
    // String() made any value a directory name: `{}` spilled into "./[object Object]".
    ['spillDir', () => new ToolExecutor({ spillDir: {} })],
    ['spillDir', () => new ToolExecutor({ spillDir: 5 })],
    // Clamped to the largest count by the cast, without a word.
    ['maxResultChars', () => new ToolExecutor().tool({ name: 't', maxResultChars: 1e300 }, async () => 'ok')],
    ['defaultMaxResultChars', () => new ToolExecutor({ defaultMaxResultChars: 2 ** 64 })],
    ['turnBudgetChars', () => new ToolExecutor({ turnBudgetChars: 1e300 })],
    ['maxEventBytes', () => new SseParser({ maxEventBytes: 1e300 })],
    ['window', () => new ContextBudget({ window: 1e300, maxOutputTokens: 1000 })],
    ['warningBuffer', () => new ContextBudget({ window: 200000, maxOutputTokens: 1000, warningBuffer: 2 ** 64 })],
    ['description', () => new ToolExecutor().tool({ name: 't', description: 5 }, async () => 'ok')],
    ['schema', () => new ToolExecutor().tool({ name: 't', schema: 'object' }, async () => 'ok')],
    ['tokenizer', () => new ContextTracker({ tokenizer: 5 })],
  ]
  for (const [option, call] of cases) {
    assert.throws(call, (err) => err instanceof InvalidArgumentError && err.message.includes(option), option)
  }
  // The argument is named as index.d.ts and Python name it (it was `len`).
  assert.throws(() => new ContextTracker().truncate(-1), (err) => err instanceof InvalidArgumentError && err.message.startsWith('length must be'))
  // The largest counts below 2^64 still work.
  new ToolExecutor({ defaultMaxResultChars: 2 ** 63, turnBudgetChars: Number.MAX_SAFE_INTEGER })
  new SseParser({ maxEventBytes: 2 ** 63 })
})

test('lone surrogates: not errors, ids come back as submitted, halves of a pair in adjacent results stay apart', async () => {
  // Settled texts travel joined in one string (node/src/joined.rs): a lone high surrogate
  // ending one result and a lone low one starting the next form a valid pair there.
  assert.equal(typeof estimateTokens('\ud800'), 'number')
  assert.equal(estimateTokens('a\udc00\ud800b'), estimateTokens('a\ufffd\ufffdb'))
  const ex = new ToolExecutor()
  ex.tool({ name: 'echo', concurrencySafe: true }, async ({ text }) => text)
  const texts = ['\ud83d', '\ude00', 'x\ud800', '\udfffy', '😀']
  const uses = texts.map((text, i) => use(`id\ud800${i}`, 'echo', { text }))
  for (const results of [await ex.run(uses), await turnResults(ex, uses)]) {
    assert.deepEqual(results.map((r) => r.tool_use_id), uses.map((u) => u.id))
    // Each text comes back with its lone halves replaced, never merged with its neighbour; run()
    // too, though it gives back the texts it kept in JS (they were returned lone halves and all,
    // where a turn's results had U+FFFD).
    assert.deepEqual(results.map((r) => r.content), ['\ufffd', '\ufffd', 'x\ufffd', '\ufffdy', '😀'])
  }
  // A turn's events too (they came back with U+FFFD for the lone surrogate).
  const turn = ex.turn()
  turn.submit(...uses)
  turn.seal()
  for await (const event of turn) {
    const id = event.type === 'result' ? event.result.tool_use_id : event.toolUseId
    assert.equal(id, uses[event.index].id, event.type)
  }
})

test('a lone surrogate in an answer, a content block or a progress datum is U+FFFD, whichever way the call runs', async () => {
  // JSON.stringify writes a lone half as a `\ud800` escape, which serde_json refuses: through
  // the reply batch of calls with a timeout, that threw from a microtask (the process ended)
  // and lost every reply of the batch (the siblings timed out); a datum became null, content
  // blocks an "not a JSON array" error. napi's own string conversion, and turn() for plain
  // text, already gave U+FFFD.
  for (const timeoutMs of [undefined, 3000]) {
    const ex = new ToolExecutor()
    ex.tool({ name: 'text', concurrencySafe: true, timeoutMs }, async () => 'ab\ud800cd')
    ex.tool({ name: 'blocks', concurrencySafe: true, timeoutMs }, async () => [{ type: 'text', text: 'x\udc00' }])
    ex.tool({ name: 'report', concurrencySafe: true, timeoutMs }, async (_input, ctx) => {
      ctx.progress({ partial: 'p\ud83d', key: ['\ude00'] })
      ctx.progress({ line: 'fine' })
      return 'reported'
    })
    ex.tool({ name: 'good', concurrencySafe: true, timeoutMs }, async () => 'fine')
    const uses = [use('t', 'text'), use('b', 'blocks'), use('r', 'report'), use('g', 'good')]
    const expected = ['ab\ufffdcd', [{ type: 'text', text: 'x\ufffd' }], 'reported', 'fine']
    const what = `timeoutMs ${timeoutMs}`
    const ran = await ex.run(uses)
    assert.deepEqual(ran.map((r) => r.content), expected, `run(), ${what}`)
    assert.ok(ran.every((r) => !r.is_error), what)
    const turn = ex.turn()
    turn.submit(...uses)
    turn.seal()
    const progress = []
    for await (const event of turn) if (event.type === 'progress') progress.push(event.data)
    assert.deepEqual(progress, [{ partial: 'p\ufffd', key: ['\ufffd'] }, { line: 'fine' }], `progress, ${what}`)
    assert.deepEqual((await turn.results()).map((r) => r.content), expected, `turn, ${what}`)
  }
})

test("a lone surrogate in a schema-checked tool's input does not make run() throw", async () => {
  // The input crosses as JSON for the schema check: the whole run threw InvalidArgumentError
  // ("unexpected end of hex escape"), its well-formed sibling unanswered.
  const ex = new ToolExecutor()
  const seen = []
  ex.tool({ name: 's', schema: { type: 'object', properties: { s: { type: 'string' } } } }, (input) => {
    seen.push(input.s)
    return `got ${input.s}`
  })
  const results = await ex.run([use('ok', 's', { s: 'a' }), use('x', 's', { s: 'a\ud800' })])
  // The tool gets the input as submitted; its answer reads as the native side reads it.
  assert.deepEqual(seen, ['a', 'a\ud800'])
  assert.deepEqual(results.map((r) => [r.content, r.is_error]), [['got a', false], ['got a\ufffd', false]])
})

/** `n` arrays around a string. */
function deep(n) {
  let value = 'x'
  for (let i = 0; i < n; i++) value = [value]
  return value
}

test('a content or progress datum the native layer cannot read fails alone, never its batch', async () => {
  // Nested past serde_json's depth limit: a progress datum made the whole reply batch of calls
  // with a timeout unreadable (thrown from a microtask, every other reply in it lost, the
  // siblings timed out), and became null in a turn; content blocks got an error that blamed
  // their shape.
  for (const timeoutMs of [undefined, 3000]) {
    const ex = new ToolExecutor()
    ex.tool({ name: 'deep', concurrencySafe: true, timeoutMs }, async () => [{ type: 'text', text: 'x', extra: deep(200) }])
    ex.tool({ name: 'report', concurrencySafe: true, timeoutMs }, async (_input, ctx) => {
      ctx.progress(deep(200))
      return 'reported'
    })
    ex.tool({ name: 'good', concurrencySafe: true, timeoutMs }, async () => 'fine')
    const what = `timeoutMs ${timeoutMs}`
    const turn = ex.turn()
    turn.submit(use('d', 'deep'), use('r', 'report'), use('g', 'good'))
    turn.seal()
    const progress = []
    for await (const event of turn) if (event.type === 'progress') progress.push(event.data)
    // Kept as its JSON text, not lost.
    assert.deepEqual(progress, [JSON.stringify(deep(200))], what)
    const [bad, reported, good] = await turn.results()
    assert.deepEqual([reported.content, reported.is_error, good.content, good.is_error], ['reported', false, 'fine', false], what)
    assert.equal(bad.is_error, true, what)
    assert.match(bad.content, /nested deeper than 127 levels/, what)
  }
})

test('a reply batch with a lone surrogate escape or an unreadable content is read item by item', () => {
  // What JSON.stringify makes of a lone half, sent straight to the native executor: it threw.
  const native = require('../index.js')
  const executor = new native.ToolExecutor({}, [])
  assert.equal(executor.completeJson('[1, 0, "a\\ud800", 2, 4, {"k": "\\udc00"}, 3, 2, "not blocks"]'), 0)
  assert.throws(() => executor.completeJson('[1, 0'), /tool replies are not valid/)
})

async function turnResults(ex, uses) {
  const turn = ex.turn()
  turn.submit(...uses)
  turn.seal()
  return turn.results()
}

test('views on a SharedArrayBuffer feed like any bytes; a detached buffer\'s view is refused by feed and estimate', () => {
  const text = 'event: ping\ndata: {"type":"ping"}\n\n'
  const shared = new Uint8Array(new SharedArrayBuffer(text.length))
  shared.set(Buffer.from(text))
  assert.deepEqual(new SseParser().feed(shared), [{ event: 'ping', data: '{"type":"ping"}', id: '' }])
  assert.deepEqual(new StreamDecoder({ provider: 'anthropic' }).feed(shared), [{ type: 'ping' }])
  assert.equal(estimateTokens(shared), estimateTokens(text))
  const buffer = new ArrayBuffer(8)
  const view = new Uint8Array(buffer)
  structuredClone(buffer, { transfer: [buffer] }) // detaches: the view is now empty
  // A feed has no bytes to read, and says so (an empty chunk lost a chunk without a word: see
  // sse.test.js); so does an estimate, which counted 0 tokens for text it never saw (see
  // tokens.test.js).
  assert.throws(() => new SseParser().feed(view), InvalidArgumentError)
  assert.throws(() => new StreamDecoder({ provider: 'anthropic' }).feed(view), InvalidArgumentError)
  assert.throws(() => estimateTokens(view), InvalidArgumentError)
})

test('lone surrogates inside objects count as U+FFFD, as in a plain string and in Python', () => {
  // They were refused: JSON.stringify escapes a lone half (`\ud800`), which serde_json rejected
  // ("unexpected end of hex escape").
  for (const [lone, replaced] of [['x\ud800', 'x\ufffd'], ['\udc00y', '\ufffdy'], ['a\ud83d\\ud800', 'a\ufffd\\ud800']]) {
    assert.equal(estimateTokens({ type: 'text', text: lone }), estimateTokens({ type: 'text', text: replaced }))
    assert.equal(estimateTokens([{ role: 'user', content: lone }]), estimateTokens([{ role: 'user', content: replaced }]))
    const withLone = new ContextTracker()
    withLone.pushMessage({ role: 'user', content: lone })
    const withReplaced = new ContextTracker()
    withReplaced.pushMessage({ role: 'user', content: replaced })
    assert.deepEqual(withLone.tokens(), withReplaced.tokens())
  }
})

test("a tracker's saturated count goes into a budget's state, as in Python", () => {
  // tokens() gives 2 ** 64 for a count saturated at u64::MAX; state() and percentLeft() refused
  // that very number ("below 2^64"), where Python's state(tracker.tokens()["tokens"]) is
  // "blocking".
  const tracker = new ContextTracker()
  tracker.pushMessage({ role: 'user', content: 'hi' })
  tracker.recordUsage({ input_tokens: 1e19, output_tokens: 1e19 })
  const budget = new ContextBudget({ window: 200_000, maxOutputTokens: 32_000 })
  const { tokens } = tracker.tokens()
  assert.equal(budget.state(tokens), 'blocking')
  assert.equal(budget.percentLeft(tokens), 0)
  assert.equal(budget.state(1e300), 'blocking')
  // Still refused: what no count is.
  for (const bad of [-1, 1.5, NaN, Infinity]) {
    assert.throws(() => budget.state(bad), InvalidArgumentError)
    assert.throws(() => budget.percentLeft(bad), InvalidArgumentError)
  }
})

test('options of the wrong type are refused by name, and numbers JSON has no form for are not sent as null', async () => {
  // These reached napi unchecked ("Failed to convert JavaScript value ... into rust type"), a Map
  // or an array as timeouts set nothing, and NaN in a request or an agent's extra was sent as
  // null (a temperature: NaN became no temperature) where Python refuses the float.
  const refused = (call, message) =>
    assert.throws(call, (err) => err instanceof InvalidArgumentError && err.message.includes(message), message)
  refused(() => new Client({ apiKey: 5 }), 'apiKey must be a string')
  refused(() => new Client({ apiKey: 'k', baseUrl: new URL('http://127.0.0.1:9') }), 'baseUrl must be a string')
  refused(() => new Client({ apiKey: 'k', anthropicVersion: 1 }), 'anthropicVersion must be a string')
  refused(() => new Client({ apiKey: 'k', retryBaseDelayMs: '5' }), 'retryBaseDelayMs must be a number')
  refused(() => new Client({ apiKey: 'k', anthropicBeta: 'a,b' }), 'anthropicBeta must be an array of strings')
  refused(() => new Client({ apiKey: 'k', anthropicBeta: [1] }), 'anthropicBeta must be an array of strings')
  refused(() => new Client({ apiKey: 'k', timeouts: new Map([['totalMs', 0]]) }), 'timeouts must be a plain object')
  refused(() => new Client({ apiKey: 'k', timeouts: [] }), 'timeouts must be a plain object')
  refused(() => new Client({ apiKey: 'k', timeouts: { idleMs: '5' } }), 'timeouts.idleMs must be a number')
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', maxRetries: 0 })
  refused(() => new Agent(client, { model: 'm', system: 5 }), 'system must be a string')
  refused(() => new Agent(client, { model: 'm', promptCaching: 1 }), 'promptCaching must be a boolean')
  refused(() => new Agent(client, { model: 'm', tokenizer: 5 }), 'tokenizer must be a string')
  refused(() => new Agent(client, { model: 'm', workspace: 5 }), 'workspace must be a string')
  refused(() => new Agent(client, { model: 'm', extra: () => ({ temperature: 2 }) }), 'extra must be an object')
  for (const bad of [NaN, Infinity, -Infinity]) {
    refused(() => new Agent(client, { model: 'm', extra: { temperature: bad } }), `"temperature" is ${bad}, which JSON has no form for`)
    await assert.rejects(
      async () => {
        for await (const _ of client.stream({ model: 'm', max_tokens: 10, temperature: bad, messages: [{ role: 'user', content: 'hi' }] })) {
          // Nothing is sent.
        }
      },
      (err) => err instanceof InvalidArgumentError && err.message.includes(`"temperature" is ${bad}`),
    )
  }
  // A null the caller wrote is sent as written.
  new Agent(client, { model: 'm', extra: { metadata: { user_id: null }, temperature: 0.5 } })
})

test('a malformed tool use is refused naming its position and what it lacks', async () => {
  // It said "needs string `id` and `name` (and an `input`)", for any entry: input is optional.
  const ex = new ToolExecutor().tool({ name: 't' }, async () => 'ok')
  const refused = (uses, message) =>
    assert.rejects(ex.run(uses), (err) => err instanceof InvalidArgumentError && err.message === message)
  await refused([{ id: 'a', name: 't' }, { name: 't' }], 'tool use 1 needs a string `id` and `name` (and may have an `input`): `id` is no string')
  await refused([{ id: 'a', name: 5 }], 'tool use 0 needs a string `id` and `name` (and may have an `input`): `name` is no string')
  await refused(['x'], 'tool use 0 needs a string `id` and `name` (and may have an `input`): it is no object')
  assert.equal((await ex.run([{ id: 'a', name: 't' }]))[0].content, 'ok')
})

test('run() given an array with a hole refuses it naming its position, not with a bare TypeError', async () => {
  // Uses collected by content block index (\`uses[event.index] = ...\`, a text block first)
  // leave a hole at 0: forEach skipped it in the check, and the encoding then read
  // \`undefined.input\` ("TypeError: Cannot read properties of undefined").
  const ex = new ToolExecutor().tool({ name: 't' }, async () => 'ok')
  const uses = []
  uses[1] = { id: 'b', name: 't' }
  await assert.rejects(ex.run(uses), (err) => err instanceof InvalidArgumentError && err.message === 'tool use 0 needs a string `id` and `name` (and may have an `input`): it is no object')
  const turn = ex.turn()
  assert.throws(() => turn.submit(...uses), InvalidArgumentError)
  turn.seal()
})

test('a refused number is quoted as JavaScript writes it: Infinity, not inf; 1e+300, not 300 digits', () => {
  // The messages showed Rust's rendering of the value given: `timeoutMs: Infinity` was "got
  // inf", `maxConcurrency: 1e300` a 301-digit number.
  const { ContextBudget, SseParser, Agent, Client } = require('../lib/index.js')
  const refused = (call, text) =>
    assert.throws(call, (err) => err instanceof InvalidArgumentError && err.message.endsWith(text) || assert.fail(`${err.message} does not end with ${text}`))
  refused(() => new ToolExecutor({ maxConcurrency: Infinity }), 'got Infinity')
  refused(() => new ToolExecutor({ maxConcurrency: 1e300 }), 'got 1e+300')
  refused(() => new ToolExecutor({ maxConcurrency: -Infinity }), 'got -Infinity')
  refused(() => new ToolExecutor({ defaultMaxResultChars: 2 ** 70 }), 'got 1.1805916207174113e+21')
  refused(() => new ToolExecutor().tool({ name: 't', timeoutMs: Infinity }, () => 'x'), 'got Infinity')
  assert.throws(() => new ToolExecutor({ cleanupGraceMs: 1e300 }), (err) => /at most 1\.8446744073709552e\+22\), got 1e\+300$/.test(err.message))
  refused(() => new ToolExecutor().tool({ name: 't', timeoutMs: 1e-7 }, () => 'x'), 'got 1e-7: nothing could finish within it (leave it unset for the default; a very long timeout is none)')
  refused(() => new SseParser({ maxEventBytes: Infinity }), 'got Infinity')
  refused(() => new ContextBudget({ model: 'm', warningBuffer: -Infinity }), 'got -Infinity')
  refused(() => new ContextBudget({ model: 'm' }).state(Infinity), 'got Infinity')
  refused(() => new Agent(new Client({ apiKey: 'k', fromEnv: false }), { model: 'm', maxTurns: Infinity }), 'got Infinity')
})

test('workspace and spillDir take a file: URL, as Node\'s fs does and as Python takes a pathlib.Path', async () => {
  // `new URL('./sandbox/', import.meta.url)`, the ESM way to name a directory, was refused as
  // "must be a string"; Python's Agent(workspace=Path(...)) is taken.
  const fs = require('node:fs')
  const os = require('node:os')
  const path = require('node:path')
  const { pathToFileURL } = require('node:url')
  const { Agent, Client } = require('../lib/index.js')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferroloop-url-'))
  try {
    fs.writeFileSync(path.join(dir, 'note.txt'), 'in the workspace\n')
    const spill = path.join(dir, 'spill')
    const ex = new ToolExecutor({ spillDir: pathToFileURL(spill), defaultMaxResultChars: 10 }).tool({ name: 'big' }, () => 'x'.repeat(100))
    const [result] = await ex.run([use('t', 'big')])
    assert.ok(result.content.includes(spill), result.content)
    const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false })
    new Agent(client, { model: 'm', tools: ['read'], workspace: pathToFileURL(dir) })
    new Agent(client, { model: 'm', tools: ['read'], workspace: pathToFileURL(dir + '/') })
    for (const bad of [new URL('https://example.com/dir'), 42]) {
      assert.throws(() => new Agent(client, { model: 'm', workspace: bad }), (err) => err instanceof InvalidArgumentError && /workspace must be a string or a file: URL/.test(err.message))
      assert.throws(() => new ToolExecutor({ spillDir: bad }), (err) => err instanceof InvalidArgumentError && /spillDir must be a string or a file: URL/.test(err.message))
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('a header value that cannot be sent is refused naming its header, not as "bad extra header"', () => {
  // Which of the headers was wrong went unsaid; the value itself may be a secret and is not shown.
  const { Client } = require('../lib/index.js')
  assert.throws(
    () => new Client({ apiKey: 'k', fromEnv: false, headers: { 'x-team': 'ok', 'x-secret-token': 'abc\n' } }),
    (err) => err instanceof InvalidArgumentError && /header "x-secret-token"/.test(err.message) && /control character/.test(err.message) && !err.message.includes('abc'),
  )
  assert.throws(
    () => new Client({ apiKey: 'k', fromEnv: false, anthropicVersion: '2023-06-01\n' }),
    (err) => err instanceof InvalidArgumentError && /header "anthropic-version"/.test(err.message),
  )
})
