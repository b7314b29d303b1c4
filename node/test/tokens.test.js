'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')

const ferroloop = require('../lib/index.js')
const { estimateTokens, estimateRequest, ContextBudget, ContextTracker, InvalidArgumentError } = ferroloop

test('estimateTokens: strings and bytes agree, families differ, CJK is not chars/4', () => {
  const prose = 'The executor runs safe tools in parallel and returns results in request order. '.repeat(20)
  const n = estimateTokens(prose)
  assert.ok(n > 0)
  assert.equal(estimateTokens(Buffer.from(prose)), n)
  assert.equal(estimateTokens(prose, { tokenizer: 'claude' }), n, 'claude is the default')
  for (const tokenizer of ['o200k', 'cl100k', 'claude-legacy']) {
    assert.ok(estimateTokens(prose, { tokenizer }) > 0, tokenizer)
  }
  const cjk = '模型在流式输出时工具并行运行结果按顺序返回'.repeat(50)
  assert.ok(estimateTokens(cjk, { tokenizer: 'o200k' }) > cjk.length / 4 * 1.5, 'CJK costs far more than chars/4')
  assert.equal(estimateTokens(''), 0)
})

test('estimateTokens also takes messages, a message, a block or a request body, as Python does', () => {
  // Python's estimate_tokens(obj) has always read these; Node took only a string or bytes.
  const messages = [
    { role: 'user', content: 'Read src/main.rs please.' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'src/main.rs' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'fn main() {}' }] },
  ]
  const body = { system: 'You are a careful coding agent.', messages }
  assert.equal(estimateTokens(messages), estimateRequest({ messages }).messages)
  assert.equal(estimateTokens(body), estimateRequest(body).total)
  assert.equal(estimateTokens(body, { tokenizer: 'o200k' }), estimateRequest(body, { tokenizer: 'o200k' }).total)
  assert.equal(estimateTokens(messages[0]) + estimateTokens(messages.slice(1)), estimateTokens(messages))
  const block = { type: 'text', text: 'Read src/main.rs please.' }
  assert.ok(estimateTokens(block) > 0)
  assert.equal(estimateTokens([]), 0)
  // Not text, messages or a block: other typed arrays, buffers and class instances are refused,
  // not estimated as the JSON of an object.
  for (const bad of [42, null, undefined, true, new Uint16Array(4), new ArrayBuffer(4), new Map(), new Date(0)]) {
    assert.throws(() => estimateTokens(bad), InvalidArgumentError, String(bad))
  }
})

test('estimateRequest: parts add up; tools and system count', () => {
  const messages = [
    { role: 'user', content: 'Read src/main.rs please.' },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'src/main.rs' } }],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'fn main() {}' }] },
  ]
  const bare = estimateRequest({ messages })
  assert.equal(bare.total, bare.system + bare.tools + bare.messages + bare.overhead)
  const full = estimateRequest({
    system: 'You are a careful coding agent.',
    tools: [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
    messages,
  })
  assert.ok(full.system > 0 && full.tools > 0)
  assert.equal(full.messages, bare.messages)
  assert.ok(full.total > bare.total)
  // An array (the messages alone, by mistake) is not a request: Python raises TypeError; Node
  // gave the bare overhead, 4 tokens, as if the request were empty.
  assert.throws(() => estimateRequest(messages), InvalidArgumentError)
})

test("ContextBudget: Claude Code's thresholds by default, configurable, by model", () => {
  const budget = new ContextBudget({ window: 200_000, maxOutputTokens: 32_000 })
  assert.equal(budget.effectiveWindow, 180_000)
  assert.equal(budget.autocompactThreshold, 167_000)
  assert.equal(budget.warningThreshold, 147_000)
  assert.equal(budget.blockingThreshold, 177_000)
  assert.deepEqual(
    [100_000, 147_000, 167_000, 177_000].map((t) => budget.state(t)),
    ['ok', 'warning', 'auto_compact', 'blocking'],
  )
  const custom = new ContextBudget({ window: 100_000, maxOutputTokens: 8_000, autocompactBuffer: 5_000, blockingBuffer: 1_000 })
  assert.equal(custom.effectiveWindow, 92_000)
  assert.equal(custom.autocompactThreshold, 87_000)
  assert.equal(custom.blockingThreshold, 91_000)
  const byPercent = new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, autocompactPercent: 50 })
  assert.equal(byPercent.autocompactThreshold, 90_000)
  const model = new ContextBudget({ model: 'claude-sonnet-4-20250514' })
  assert.ok(model.window >= 200_000)
  assert.throws(() => new ContextBudget({}), InvalidArgumentError)
  assert.throws(() => new ContextBudget({ window: -1, maxOutputTokens: 1 }), InvalidArgumentError)
  assert.throws(() => budget.state(1.5), InvalidArgumentError)
})

test('ContextTracker: usage anchoring, estimates only for what was appended since', () => {
  const tracker = new ContextTracker()
  assert.equal(tracker.tokenizer, 'claude')
  tracker.setSystem('You are terse.')
  tracker.pushMessage({ role: 'user', content: 'What is in the repo?' })
  assert.equal(tracker.tokens().method, 'estimate')
  tracker.recordUsage({ input_tokens: 1200, cache_creation_input_tokens: 0, cache_read_input_tokens: 300, output_tokens: 0 })
  assert.deepEqual(tracker.tokens(), { tokens: 1500, method: 'exact' })
  tracker.pushMessage({ role: 'assistant', content: 'A Rust workspace with a core crate.' })
  const after = tracker.tokens()
  assert.equal(after.method, 'usage+estimate')
  assert.ok(after.tokens > 1500)
  assert.equal(tracker.length, 2)

  // Replacing the history with the same messages re-estimates nothing (content-hash cache).
  const bytes = tracker.bytesEstimated
  tracker.replaceMessages([
    { role: 'user', content: 'What is in the repo?' },
    { role: 'assistant', content: 'A Rust workspace with a core crate.' },
  ])
  assert.equal(tracker.bytesEstimated, bytes)
  // ... and keeps the usage of the unchanged prefix it covered (it was dropped: a pure estimate).
  assert.deepEqual(tracker.tokens(), after)
  tracker.truncate(1)
  assert.equal(tracker.length, 1)

  tracker.correction = 1.2
  assert.equal(tracker.correction, 1.2)
  assert.throws(() => {
    tracker.correction = -1
  }, InvalidArgumentError)
  assert.throws(() => tracker.recordUsage({ nothing: 1 }), InvalidArgumentError)
  // A count that is not a non-negative integer names its field (read as absent, a negative input
  // made the usage "output only", ignored without a word); null is absent.
  for (const usage of [
    { input_tokens: -5, output_tokens: 3 },
    { input_tokens: 1500.5, output_tokens: 3 },
    { input_tokens: 700, cache_read_input_tokens: '900' },
    { prompt_tokens: 100, completion_tokens: -1 },
    // JSON.stringify made NaN and Infinity null, read as absent: a NaN input made the usage
    // "output only" (ignored), a NaN cache count an exact-looking count without it.
    { input_tokens: NaN, output_tokens: 3 },
    { input_tokens: 100, cache_read_input_tokens: NaN },
    { input_tokens: Infinity },
    { prompt_tokens: 100, completion_tokens: -Infinity },
  ]) {
    const before = tracker.tokens()
    assert.throws(
      () => tracker.recordUsage(usage),
      (err) => err instanceof InvalidArgumentError && /must be a non-negative integer/.test(err.message),
    )
    assert.deepEqual(tracker.tokens(), before)
  }
  tracker.recordUsage({ input_tokens: 900, cache_creation_input_tokens: null, output_tokens: 0 })
  assert.deepEqual(tracker.tokens(), { tokens: 900, method: 'exact' })
  // Messages must be objects, as C has it (a string was taken and cost 4 tokens).
  const length = tracker.length
  for (const message of ['hello', 3, null, ['a']]) {
    assert.throws(
      () => tracker.pushMessage(message),
      (err) => err instanceof InvalidArgumentError && /must be a JSON object/.test(err.message),
    )
  }
  assert.throws(
    () => tracker.replaceMessages([{ role: 'user', content: 'a' }, 'b']),
    (err) => err instanceof InvalidArgumentError && /message 1 must be a JSON object/.test(err.message),
  )
  assert.equal(tracker.length, length)
  assert.deepEqual(tracker.tokens(), { tokens: 900, method: 'exact' })
  assert.throws(() => new ContextTracker({ tokenizer: 'nope' }), InvalidArgumentError)
  assert.throws(() => estimateTokens(42), InvalidArgumentError)
})

// The message of a family without an offline vocabulary: the core's (NoExactTokenizer), in every build.
function noVocabulary(family) {
  return (err) =>
    err instanceof ferroloop.UnsupportedError &&
    err.code === 'unsupported' &&
    err.message === `no exact offline tokenizer for ${family} (exact counting supports o200k and cl100k)`
}

test('ContextTracker: each model learns its own correction, as in Python and C', () => {
  // One factor per tracker mixed the usage of every model a conversation went to (a fallback
  // after an overload): the second model's estimates were priced with the first one's usage.
  const tracker = new ContextTracker()
  assert.equal(tracker.model, '')
  tracker.model = 'model-a'
  tracker.pushMessage({ role: 'user', content: 'What is in the repo? '.repeat(100) })
  const raw = tracker.tokens().tokens
  const high = Math.floor((raw * 14) / 10)
  for (let i = 0; i < 20; i++) tracker.recordUsage({ input_tokens: high })
  const a = tracker.correction
  assert.ok(a > 1.35 && a <= 1.4, `${a}`)
  assert.deepEqual(tracker.tokens(), { tokens: high, method: 'exact' })
  // A new model starts from the current factor; the first model's count is kept, not exact.
  tracker.model = 'model-b'
  assert.equal(tracker.model, 'model-b')
  assert.equal(tracker.correction, a)
  assert.deepEqual(tracker.tokens(), { tokens: high, method: 'usage+estimate' })
  for (let i = 0; i < 20; i++) tracker.recordUsage({ input_tokens: Math.floor((raw * 9) / 10) })
  assert.ok(tracker.correction > 0.85 && tracker.correction < 0.95, `${tracker.correction}`)
  assert.equal(tracker.correctionFor('model-a'), a)
  assert.equal(tracker.correctionFor('model-c'), null)
  tracker.model = 'model-a'
  assert.equal(tracker.correction, a)
  assert.throws(() => {
    tracker.model = 3
  }, InvalidArgumentError)
  assert.throws(() => tracker.correctionFor(undefined), InvalidArgumentError)
  assert.equal(tracker.model, 'model-a')
})

test('countTokens counts exactly for o200k and cl100k; other families are UnsupportedError', { skip: !ferroloop.hasExactCounting() && 'built without the cargo feature `exact`' }, () => {
  assert.equal(ferroloop.hasExactCounting(), true)
  assert.equal(ferroloop.countTokens('hello world', 'o200k'), 2)
  assert.equal(ferroloop.countTokens('hello world', 'cl100k'), 2)
  assert.equal(ferroloop.countTokens('', 'o200k'), 0)
  assert.throws(() => ferroloop.countTokens('hello', 'claude'), (err) => err instanceof ferroloop.UnsupportedError && err.code === 'unsupported')
  assert.throws(() => ferroloop.countTokens('hello', 'nope'), ferroloop.InvalidArgumentError)
  assert.throws(() => ferroloop.countTokens(5, 'o200k'), ferroloop.InvalidArgumentError)
  for (const family of ['claude', 'claude-legacy']) assert.throws(() => ferroloop.countTokens('hello', family), noVocabulary(family))
})

test('without the feature countTokens is an UnsupportedError, and a Claude family gets the core\'s reason, not a rebuild', { skip: ferroloop.hasExactCounting() && 'built with the cargo feature `exact`' }, () => {
  assert.equal(ferroloop.hasExactCounting(), false)
  assert.throws(
    () => ferroloop.countTokens('hello world', 'o200k'),
    (err) => err instanceof ferroloop.UnsupportedError && /without the cargo feature `exact`/.test(err.message),
  )
  // It advised rebuilding with the feature, which refuses these families too (Python's
  // count_tokens answers them as a build with the feature does: see tokens::vocabulary).
  for (const family of ['claude', 'claude-legacy']) assert.throws(() => ferroloop.countTokens('hello', family), noVocabulary(family))
})

test('TextEstimator: a string piece may end between the two halves of a surrogate pair (an emoji)', () => {
  const { TextEstimator } = ferroloop
  const text = 'Emoji: ' + '😀 👍🏽 🇯🇵 '.repeat(300) + '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ' + '😀'.repeat(1000)
  for (const tokenizer of ['claude', 'o200k']) {
    const whole = estimateTokens(text, { tokenizer })
    for (const size of [1, 3, 7, 1000]) {
      const estimator = new TextEstimator({ tokenizer })
      for (let start = 0; start < text.length; start += size) estimator.feed(text.slice(start, start + size))
      assert.equal(estimator.estimate(), whole, `${tokenizer}, pieces of ${size} code units`)
    }
  }
  // Asked between the halves, the estimate is the text so far's: its lone high surrogate counts
  // as U+FFFD, as estimateTokens counts it; the low half then completes the character.
  const estimator = new TextEstimator()
  estimator.feed('ab 😀'.slice(0, -1))
  assert.equal(estimator.estimate(), estimateTokens('ab \ud83d'))
  estimator.feed('\ude00 cd')
  assert.equal(estimator.estimate(), estimateTokens('ab 😀 cd'))
  // Bytes cannot complete a high surrogate held from a string: it stays lone (U+FFFD).
  const mixed = new TextEstimator()
  mixed.feed('x\ud83d')
  mixed.feed(Buffer.from([0xf0, 0x9f]))
  mixed.feed(Buffer.from([0x98, 0x80]))
  assert.equal(mixed.estimate(), estimateTokens('x\ufffd😀'))
  // A string piece that is only the high half.
  const halves = new TextEstimator()
  halves.feed('\ud83d')
  assert.equal(halves.estimate(), estimateTokens('\ufffd'))
  halves.feed('\ude00')
  assert.equal(halves.estimate(), estimateTokens('😀'))
})

test('TextEstimator: pieces (strings, or bytes splitting characters) give the whole text\'s estimate', () => {
  const { TextEstimator } = ferroloop
  let text = ''
  for (let i = 0; i < 2000; i++) {
    text += `line ${i}: Обычный текст, 日本語のテキスト, ${(i * 7919).toString(16)} and some English words.\n`
  }
  text += 'no newline at the end ж'
  const bytes = Buffer.from(text)
  for (const tokenizer of ['claude', 'o200k', 'cl100k', 'claude-legacy']) {
    const whole = estimateTokens(text, { tokenizer })
    const byBytes = new TextEstimator({ tokenizer })
    for (let start = 0; start < bytes.length; start += 997) byBytes.feed(bytes.subarray(start, start + 997))
    assert.equal(byBytes.estimate(), whole, tokenizer)
    const byText = new TextEstimator({ tokenizer })
    for (let start = 0; start < text.length; start += 1234) byText.feed(text.slice(start, start + 1234))
    assert.equal(byText.estimate(), whole, tokenizer)
  }
  assert.equal(new TextEstimator().estimate(), 0)
  assert.throws(() => new TextEstimator().feed(42), InvalidArgumentError)
  assert.throws(() => new TextEstimator({ tokenizer: 'gpt2' }), InvalidArgumentError)
})

test('estimateRequest gives the table every language shares (tests/tokens/requests/expected.tsv)', () => {
  const fs = require('node:fs')
  const path = require('node:path')
  const folder = path.join(__dirname, '..', '..', 'tests', 'tokens', 'requests')
  const [header, ...rows] = fs.readFileSync(path.join(folder, 'expected.tsv'), 'utf8').trimEnd().split('\n')
  const keys = header.split('\t')
  assert.ok(rows.length >= 20)
  for (const row of rows) {
    const fields = Object.fromEntries(row.split('\t').map((value, i) => [keys[i], value]))
    const body = JSON.parse(fs.readFileSync(path.join(folder, fields.file), 'utf8'))
    const options = { tokenizer: fields.tokenizer }
    const want = {}
    for (const part of ['system', 'tools', 'messages', 'overhead', 'total']) want[part] = Number(fields[part])
    assert.deepEqual({ ...estimateRequest(body, options) }, want, `${fields.file} ${fields.tokenizer}`)
    assert.equal(estimateTokens(body, options), want.total, `${fields.file} ${fields.tokenizer}`)
  }
})

test('ContextBudget: a budget that would block before it compacts is refused, as in Python and C', () => {
  // An auto-compact buffer smaller than the blocking buffer puts the auto-compact point above
  // the blocking point: the state went from 'warning' straight to 'blocking'. It was accepted.
  const refused = (options, pattern) =>
    assert.throws(() => new ContextBudget(options), (err) => err instanceof InvalidArgumentError && pattern.test(err.message))
  refused({ window: 200_000, maxOutputTokens: 32_000, autocompactBuffer: 1_000, blockingBuffer: 3_000 }, /autocompactBuffer \(1000\).*blockingBuffer \(3000\)/)
  refused({ window: 200_000, maxOutputTokens: 32_000, autocompactBuffer: 0 }, /blockingBuffer/)
  refused({ model: 'claude-sonnet-4-20250514', blockingBuffer: 20_000 }, /autocompactBuffer/)
  // A percentage only lowers the auto-compact point: it does not excuse the buffers.
  refused({ window: 200_000, maxOutputTokens: 32_000, autocompactBuffer: 0, autocompactPercent: 50 }, /autocompactBuffer/)
  const equal = new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, autocompactBuffer: 3_000, blockingBuffer: 3_000 })
  assert.equal(equal.autocompactThreshold, 177_000)
  assert.equal(equal.blockingThreshold, 177_000)
  // A window smaller than the buffers is accepted: every threshold is 0, every count blocking.
  const tiny = new ContextBudget({ window: 1_000, maxOutputTokens: 100, autocompactBuffer: 5_000, blockingBuffer: 4_000 })
  assert.deepEqual([tiny.autocompactThreshold, tiny.blockingThreshold, tiny.state(0)], [0, 0, 'blocking'])
})

test('ContextTracker refuses a system prompt or tools in no request shape, as C does', () => {
  // A tool definition not in an array counted as no tools at all, and a number as a prompt;
  // C refused both with FL_STATUS_INVALID_ARGUMENT, Python now raises TypeError.
  const tracker = new ContextTracker()
  tracker.setSystem('You are terse.')
  tracker.setTools([{ name: 'ls', input_schema: { type: 'object' } }])
  tracker.pushMessage({ role: 'user', content: 'hello' })
  const before = tracker.tokens()
  const tool = { name: 'read', description: 'reads a file', input_schema: { type: 'object' } }
  assert.throws(
    () => tracker.setTools(tool),
    (err) => err instanceof InvalidArgumentError && /tool definitions must be an array or null, got an object/.test(err.message),
  )
  for (const system of [{ type: 'text', text: 'one block' }, 3, true]) {
    assert.throws(
      () => tracker.setSystem(system),
      (err) => err instanceof InvalidArgumentError && /system prompt must be a string, an array of blocks or null/.test(err.message),
    )
  }
  assert.deepEqual(tracker.tokens(), before)
  tracker.setTools(null)
  tracker.setSystem([{ type: 'text', text: 'You are terse.' }])
  tracker.setSystem(null)
  assert.ok(tracker.tokens().tokens < before.tokens)
})

test('ContextBudget refuses a model beside explicit limits instead of ignoring it', () => {
  // `{ model, window, maxOutputTokens }` took the limits and dropped the model without a word.
  for (const options of [
    { model: 'gpt-4', window: 200_000, maxOutputTokens: 32_000 },
    { model: 'gpt-4', maxOutputTokens: 1_000 },
    { model: 'gpt-4', window: 8_192 },
  ]) {
    assert.throws(
      () => new ContextBudget(options),
      (err) => err instanceof InvalidArgumentError && /either \{ window, maxOutputTokens \} or \{ model \}/.test(err.message),
    )
  }
  assert.equal(new ContextBudget({ model: 'gpt-4', window: null, maxOutputTokens: null }).window, 8_192)
})

test('estimateTokens and TextEstimator.feed refuse bytes whose buffer is detached, where they counted 0', () => {
  const { TextEstimator, InvalidArgumentError } = require('../lib/index.js')
  const buffer = new ArrayBuffer(8)
  const view = new Uint8Array(buffer)
  const asBuffer = Buffer.from(buffer)
  structuredClone(buffer, { transfer: [buffer] })
  const refused = (what) => (err) =>
    err instanceof InvalidArgumentError &&
    err.message === `${what}: the view's ArrayBuffer is detached (transferred, or a closed stream's): it has no bytes to read`
  for (const bytes of [view, asBuffer]) {
    assert.throws(() => estimateTokens(bytes), refused('estimateTokens'))
    const estimator = new TextEstimator()
    estimator.feed('some text')
    const before = estimator.estimate()
    assert.throws(() => estimator.feed(bytes), refused('TextEstimator.feed'))
    // Nothing was fed: the text so far keeps its estimate.
    assert.equal(estimator.estimate(), before)
  }
  // Empty bytes of a live buffer are still no text.
  assert.equal(estimateTokens(new Uint8Array(0)), 0)
  const estimator = new TextEstimator()
  estimator.feed(new Uint8Array(0))
  assert.equal(estimator.estimate(), 0)
})

test('ContextBudget: settings given apply as given and only the defaults scale, as in Python and C', () => {
  // The default blocking buffer passed explicitly on gpt-4's window was refused against an
  // auto-compact default scaled to 1,293; an auto-compact buffer or a percentage leaving nothing
  // of the window was accepted, and compacted before every request.
  const given = new ContextBudget({ window: 8192, maxOutputTokens: 8192, blockingBuffer: 3000 })
  assert.equal(given.state(0), 'ok')
  assert.ok(given.warningThreshold < given.autocompactThreshold && given.autocompactThreshold <= given.blockingThreshold)
  const atZero = (err) =>
    err instanceof InvalidArgumentError && /^the auto-compact threshold is 0 tokens: autocompactBuffer \(13000\)/.test(err.message)
  assert.throws(() => new ContextBudget({ window: 8192, maxOutputTokens: 8192, autocompactBuffer: 13000 }), atZero)
  assert.throws(() => new ContextBudget({ model: 'gpt-4', autocompactBuffer: 13000 }), atZero)
  assert.throws(
    () => new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, autocompactPercent: 0.0001 }),
    (err) => err instanceof InvalidArgumentError && /autocompactPercent \(0\.0001\)/.test(err.message),
  )
  assert.throws(
    () => new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, autocompactPercent: 101 }),
    (err) => err instanceof InvalidArgumentError && err.message === 'autocompactPercent must be in (0, 100], got 101',
  )
})

test('ContextTracker: messages that are no plain object, and a prompt JSON has no form for, are refused by name', () => {
  // A Map was sent as {} and counted as an empty message; undefined and a function failed in the
  // native conversion with a message naming neither the method nor its argument.
  const tracker = new ContextTracker()
  tracker.pushMessage({ role: 'user', content: 'hello' })
  const before = tracker.tokens()
  const refused = (pattern) => (err) => err instanceof InvalidArgumentError && pattern.test(err.message)
  for (const [message, kind] of [[new Map([['role', 'user']]), 'a Map'], [undefined, 'undefined'], [() => 1, 'a function'], [new (class Note {})(), 'a Note']]) {
    assert.throws(() => tracker.pushMessage(message), refused(new RegExp(`^pushMessage: the message must be a JSON object \\(a plain object\\), got ${kind}$`)))
  }
  assert.throws(
    () => tracker.replaceMessages([{ role: 'user', content: 'a' }, new Map()]),
    refused(/^replaceMessages: message 1 must be a JSON object \(a plain object\), got a Map$/),
  )
  assert.throws(() => tracker.setSystem(undefined), refused(/^setSystem: the system prompt must be a string, an array of blocks or null, got undefined$/))
  assert.throws(() => tracker.setTools(() => []), refused(/^setTools: the tools must be an array or null, got a function$/))
  assert.deepEqual(tracker.tokens(), before)
  assert.equal(tracker.length, 1)
})

test('ContextTracker: truncate and recordUsage take any count past the end (Infinity, 2^64) as all, as Python does', () => {
  const tracker = new ContextTracker()
  tracker.pushMessage({ role: 'user', content: 'hello '.repeat(100) })
  tracker.pushMessage({ role: 'assistant', content: 'hi' })
  for (const length of [Infinity, 2 ** 64, 1e20]) {
    tracker.truncate(length)
    assert.equal(tracker.length, 2)
  }
  for (const covered of [Infinity, 2 ** 64, 1e300]) {
    tracker.recordUsage({ input_tokens: 500, output_tokens: 10 }, covered)
    assert.deepEqual(tracker.tokens(), { tokens: 510, method: 'exact' })
  }
  for (const bad of [-1, 1.5, NaN, -Infinity]) {
    assert.throws(() => tracker.truncate(bad), (err) => err instanceof InvalidArgumentError && err.message.startsWith('length must be'))
    assert.throws(() => tracker.recordUsage({ input_tokens: 1 }, bad), (err) => err instanceof InvalidArgumentError && err.message.startsWith('covered must be'))
  }
})

test('a Set inside what is counted or sent is its items (as Python counts a set); a Map is refused by name', async () => {
  // JSON.stringify writes both as {}: a message whose content was a Set of blocks counted as
  // an empty message (5 tokens for 300), and a request sent `{}` for a Set, without a word.
  const text = 'the quick brown fox jumps over the lazy dog '.repeat(20)
  const asArray = { role: 'user', content: [{ type: 'text', text }] }
  const asSet = { role: 'user', content: new Set([{ type: 'text', text }]) }
  assert.equal(estimateTokens(asSet), estimateTokens(asArray))
  assert.equal(estimateTokens([asSet]), estimateTokens([asArray]))
  assert.equal(estimateRequest({ messages: [asSet] }).total, estimateRequest({ messages: [asArray] }).total)
  const tracker = new ContextTracker()
  tracker.pushMessage(asSet)
  const expected = new ContextTracker()
  expected.pushMessage(asArray)
  assert.deepEqual(tracker.tokens(), expected.tokens())
  const withMap = { role: 'user', content: [{ type: 'text', text, meta: new Map([['a', 1]]) }] }
  const refused = (err) => err instanceof InvalidArgumentError && /a Map is not a JSON value/.test(err.message)
  assert.throws(() => estimateTokens(withMap), refused)
  assert.throws(() => estimateRequest({ messages: [withMap] }), refused)
  assert.throws(() => tracker.pushMessage(withMap), refused)
  assert.throws(() => tracker.replaceMessages([withMap]), refused)
  assert.equal(tracker.length, 1, 'the tracker is unchanged')
  // A request: the client and the agent write it the same way (Python sends a set as a list).
  const { Client, Agent } = ferroloop
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false, maxRetries: 0 })
  assert.throws(() => client.stream({ model: 'm', max_tokens: 8, messages: [withMap] }), refused)
  await assert.rejects(client.create({ model: 'm', max_tokens: 8, metadata: new Map() }), refused)
  assert.throws(() => new Agent(client, { model: 'm', extra: { metadata: new Map() } }), refused)
  const agent = new Agent(client, { model: 'm', extra: { stop_sequences: new Set(['END']) } })
  assert.throws(() => agent.run(null, { messages: [withMap] }), refused)
})

test('estimateTokens and TextEstimator.feed take a Uint8Array of another realm (a vm context, Jest\'s Buffers), as SseParser.feed does', () => {
  // `instanceof Uint8Array` is false across realms: the bytes were refused as "expects a
  // string, a Uint8Array, ...", while SseParser and StreamDecoder read them.
  const vm = require('node:vm')
  const { TextEstimator } = require('../lib/index.js')
  const text = 'hello world, the quick brown fox'
  const foreign = vm.runInNewContext(`new Uint8Array(${JSON.stringify([...Buffer.from(text)])})`)
  assert.equal(foreign instanceof Uint8Array, false)
  assert.equal(estimateTokens(foreign), estimateTokens(text))
  assert.equal(estimateTokens(foreign.subarray(6)), estimateTokens(text.slice(6)))
  const estimator = new TextEstimator()
  estimator.feed(foreign)
  assert.equal(estimator.estimate(), estimateTokens(text))
  // Other element types stay refused, of either realm.
  assert.throws(() => estimateTokens(vm.runInNewContext('new Uint16Array(4)')), InvalidArgumentError)
  assert.throws(() => new TextEstimator().feed(vm.runInNewContext('new Int8Array(4)')), InvalidArgumentError)
})

test('a number argument of another type is refused naming the argument, as ToolExecutor, Client and Agent options are', () => {
  // These crossed to napi as they were and failed in its conversion: "Failed to convert napi
  // value String into rust type `f64`", naming neither the argument nor the call.
  const { SseParser } = require('../lib/index.js')
  const budget = new ContextBudget({ model: 'claude-sonnet-4-5' })
  const tracker = new ContextTracker()
  tracker.pushMessage({ role: 'user', content: 'hi' })
  const cases = [
    [() => budget.state('100'), /^tokens must be a number, got a string$/],
    [() => budget.state(), /^tokens must be a number, got undefined$/],
    [() => budget.percentLeft(10n), /^tokens must be a number, got a bigint$/],
    [() => tracker.truncate('1'), /^length must be a number, got a string$/],
    [() => { tracker.correction = '2' }, /^the correction factor must be a number, got a string$/],
    [() => tracker.recordUsage({ input_tokens: 5 }, '1'), /^covered must be a number, got a string$/],
    [() => new ContextBudget({ window: '200000', maxOutputTokens: 8000 }), /^ContextBudget: window must be a number, got a string$/],
    [() => new ContextBudget({ model: 'claude-sonnet-4-5', autocompactPercent: '80' }), /^ContextBudget: autocompactPercent must be a number, got a string$/],
    [() => new ContextBudget({ model: 42 }), /^ContextBudget: model must be a string, got a number$/],
    [() => new SseParser({ maxEventBytes: '1024' }), /^SseParser: maxEventBytes must be a number, got a string$/],
  ]
  for (const [call, message] of cases) {
    assert.throws(call, (err) => err instanceof InvalidArgumentError && message.test(err.message), String(message))
  }
  // The tracker is unchanged by the refused calls.
  assert.equal(tracker.length, 1)
  assert.equal(tracker.correction, 1)
})
