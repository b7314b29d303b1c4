'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const {
  StreamDecoder,
  StreamTruncatedError,
  OverloadedError,
  InvalidArgumentError,
  InvalidStateError,
  ProtocolError,
  QuotaExceededError,
  RateLimitedError,
  FerroloopError,
} = require('../lib/index.js')
const { repoRoot, chunked, assertDeclared, memberLabels, assertDetachedChunksRefused } = require('./helpers.js')

const CHUNKINGS = [Infinity, 1, 7, 64, 1460]

/** Every stream with an expected final message (tests/decode/README.md). */
function decodeCases() {
  const out = []
  const expectedDir = path.join(repoRoot, 'tests', 'decode', 'expected')
  for (const provider of fs.readdirSync(expectedDir).sort()) {
    for (const file of fs.readdirSync(path.join(expectedDir, provider)).sort()) {
      const name = file.replace(/\.json$/, '')
      const candidates = [
        path.join(repoRoot, 'tests', 'fixtures', provider, `${name}.sse`),
        path.join(repoRoot, 'tests', 'decode', 'streams', provider, `${name}.sse`),
      ]
      const streamPath = candidates.find((p) => fs.existsSync(p))
      assert.ok(streamPath, `stream for ${provider}/${name}`)
      out.push({
        provider,
        name,
        bytes: fs.readFileSync(streamPath),
        expected: JSON.parse(fs.readFileSync(path.join(expectedDir, provider, file), 'utf8')),
      })
    }
  }
  return out
}

function decodeAll(provider, bytes, size, options = {}) {
  const decoder = new StreamDecoder({ provider, ...options })
  const events = []
  for (const chunk of chunked(bytes, size)) events.push(...decoder.feed(chunk))
  return { decoder, events }
}

test('every recorded and hand-written stream decodes to its expected message at every chunking', () => {
  const cases = decodeCases()
  assert.ok(cases.length >= 10, `found ${cases.length} cases`)
  for (const { provider, name, bytes, expected } of cases) {
    let reference = null
    for (const size of CHUNKINGS) {
      for (const events of [true, false]) {
        const { decoder, events: seen } = decodeAll(provider, bytes, size, { events })
        if (!events) {
          // Only the sealing events the executor needs survive events: false.
          const kinds = new Set(seen.map((e) => e.type))
          for (const kind of kinds) assert.match(kind, /^tool_use_/, `${provider}/${name}: ${kind} with events: false`)
        }
        let message
        try {
          message = decoder.finish()
        } catch (err) {
          // Streams cut by max_tokens without their end marker: the partial message is the result.
          assert.ok(err instanceof StreamTruncatedError, `${provider}/${name}: ${err}`)
          message = err.partial
        }
        assert.deepEqual(message, expected, `${provider}/${name} at chunk ${size}, events ${events}`)
        if (reference === null) reference = seen
        else if (events) assert.deepEqual(seen, reference, `${provider}/${name}: same events at chunk ${size}`)
      }
    }
  }
})

/** An Anthropic stream of one text block whose deltas are `pieces` (JSON.stringify'd, as a JavaScript server writes them). */
function textBlockStream(pieces) {
  const sse = (type, data) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
  let stream = sse('message_start', {
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'm', stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } },
  })
  stream += sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
  for (const text of pieces) {
    stream += sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })
  }
  stream += sse('content_block_stop', { type: 'content_block_stop', index: 0 })
  stream += sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } })
  stream += sse('message_stop', { type: 'message_stop' })
  return Buffer.from(stream, 'utf8')
}

test('non-ASCII text (accents, CJK, a surrogate pair, escapes) crosses intact in events, message() and finish()', () => {
  const pieces = ['plain ASCII, ', 'café ', '日本語', ' 😀', ' \\ "q" \u2028', 'é'.repeat(5000)]
  const bytes = textBlockStream(pieces)
  for (const size of [1, 3, 64, Infinity]) {
    const { decoder, events } = decodeAll('anthropic', bytes, size)
    const deltas = events.filter((e) => e.type === 'text_delta').map((e) => e.text)
    assert.deepEqual(deltas, pieces, `events at chunk ${size}`)
    assert.equal(decoder.message().content[0].text, pieces.join(''), `message() at chunk ${size}`)
    assert.equal(decoder.finish().content[0].text, pieces.join(''), `finish() at chunk ${size}`)
  }
})

test('an emoji cut between two deltas by a JavaScript gateway is joined back, as the TypeScript SDK joins it', () => {
  // JSON.stringify of a string cut inside a surrogate pair writes the lone half as `\udXXX`.
  const pieces = ['Hi \ud83d', '\ude00 there \ud83e', '\udd14', ' lone \ud83d', ' end \ud83d']
  const bytes = textBlockStream(pieces)
  assert.ok(bytes.includes('\\ud83d'), 'the halves are sent as escapes')
  // What the SDK's `+=` makes of the pieces, with the halves left alone as UTF-8 encodes them.
  const expected = Buffer.from(pieces.join(''), 'utf8').toString('utf8')
  assert.equal(expected, 'Hi 😀 there 🤔 lone \ufffd end \ufffd')
  for (const size of [1, 64, Infinity]) {
    const { decoder, events } = decodeAll('anthropic', bytes, size)
    const deltas = events.filter((e) => e.type === 'text_delta').map((e) => e.text)
    assert.deepEqual(deltas, ['Hi ', '😀 there ', '🤔', ' lone ', '\ufffd end ', '\ufffd'], `events at chunk ${size}`)
    assert.equal(decoder.finish().content[0].text, expected, `finish() at chunk ${size}`)
  }
})

test('feed() builds exactly the events of the JSON form (keys in order), at every chunking and past 256 events a chunk', () => {
  const native = require('../index.js')
  const streams = decodeCases().map(({ provider, name, bytes }) => ({ provider, name, bytes }))
  // Many deltas of every compact kind in one chunk (the offsets array grows), non-ASCII text.
  const sse = (type, data) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
  let many = sse('message_start', {
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'm', stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } },
  })
  many += sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } })
  for (let i = 0; i < 300; i++) {
    many += sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: `t${i} é` } })
  }
  many += sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } })
  many += sse('content_block_stop', { type: 'content_block_stop', index: 0 })
  many += sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } })
  for (let i = 0; i < 300; i++) {
    many += sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: i % 2 ? `日本 ${i}` : `plain ${i}` } })
  }
  many += sse('content_block_stop', { type: 'content_block_stop', index: 1 })
  many += sse('content_block_start', { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} } })
  for (const part of ['{"a"', ': "é', '😀"}']) {
    many += sse('content_block_delta', { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: part } })
  }
  many += sse('content_block_stop', { type: 'content_block_stop', index: 2 })
  many += sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } })
  many += sse('message_stop', { type: 'message_stop' })
  streams.push({ provider: 'anthropic', name: 'many deltas', bytes: Buffer.from(many, 'utf8') })
  let compared = 0
  for (const { provider, name, bytes } of streams) {
    for (const size of CHUNKINGS) {
      for (const events of [true, false]) {
        const batched = new StreamDecoder({ provider, events })
        const reference = new native.StreamDecoder({ provider, events })
        for (const chunk of chunked(bytes, size)) {
          let got
          let want
          try {
            got = batched.feed(chunk)
          } catch (err) {
            got = err.code
          }
          try {
            const json = reference.feedJson(chunk)
            want = json === null ? [] : JSON.parse(json)
          } catch (err) {
            want = require('../lib/errors.js').toFerroloopError(err).code
          }
          assert.equal(JSON.stringify(got), JSON.stringify(want), `${provider}/${name} at chunk ${size}, events ${events}`)
          compared += Array.isArray(got) ? got.length : 1
        }
      }
    }
  }
  assert.ok(compared > 3000, `compared ${compared} events`)
})

test('a tool_use is sealed (tool_use_ready) at its content_block_stop, before the message ends', () => {
  const bytes = fs.readFileSync(path.join(repoRoot, 'tests', 'fixtures', 'anthropic', 'tool_use_response.sse'))
  const { decoder, events } = decodeAll('anthropic', bytes, 1)
  const types = events.map((e) => e.type)
  const ready = events.find((e) => e.type === 'tool_use_ready')
  assert.deepEqual(
    { id: ready.id, name: ready.name, input: ready.input },
    { id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn', name: 'get_weather', input: { location: 'Paris' } },
  )
  assert.ok(types.indexOf('tool_use_ready') < types.lastIndexOf('message_delta'))
  assert.equal(decoder.isComplete, true)
})

test('message() is a valid snapshot at every point of the stream', () => {
  const bytes = fs.readFileSync(path.join(repoRoot, 'tests', 'fixtures', 'anthropic', 'basic_response.sse'))
  const decoder = new StreamDecoder({ provider: 'anthropic' })
  assert.equal(decoder.message(), null)
  let lastText = ''
  for (const chunk of chunked(bytes, 17)) {
    decoder.feed(chunk)
    const snapshot = decoder.message()
    if (snapshot === null) continue
    const text = snapshot.content.filter((b) => b.type === 'text').map((b) => b.text).join('')
    assert.ok(text.startsWith(lastText), 'text only grows')
    lastText = text
  }
  assert.equal(decoder.isComplete, true)
})

test('a truncated stream throws StreamTruncatedError with the partial message', () => {
  const bytes = fs.readFileSync(path.join(repoRoot, 'tests', 'decode', 'streams', 'anthropic', 'truncated.sse'))
  const { decoder } = decodeAll('anthropic', bytes, 5)
  assert.equal(decoder.isComplete, false)
  assert.throws(
    () => decoder.finish(),
    (err) =>
      err instanceof StreamTruncatedError &&
      err.code === 'stream_truncated' &&
      err.partial !== null &&
      err.partial.type === 'message',
  )
})

test('a mid-stream overloaded_error is a typed OverloadedError, never swallowed', () => {
  const bytes = fs.readFileSync(path.join(repoRoot, 'tests', 'decode', 'streams', 'anthropic', 'error_overloaded.sse'))
  for (const size of [Infinity, 3]) {
    const decoder = new StreamDecoder({ provider: 'anthropic' })
    let caught = null
    try {
      for (const chunk of chunked(bytes, size)) decoder.feed(chunk)
      decoder.finish()
    } catch (err) {
      caught = err
    }
    assert.ok(caught instanceof OverloadedError, String(caught))
    assert.equal(caught.code, 'overloaded')
    assert.equal(caught.errorType, 'overloaded_error')
    assert.equal(caught.partial.type, 'message', 'the partial message comes with the error')
  }
})

test('an insufficient_quota error event is a QuotaExceededError, not a RateLimitedError', () => {
  const bytes = Buffer.from(
    'data: {"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}\n\n',
  )
  const decoder = new StreamDecoder({ provider: 'openai-chat' })
  let caught = null
  try {
    decoder.feed(bytes)
    decoder.finish()
  } catch (err) {
    caught = err
  }
  assert.ok(caught instanceof QuotaExceededError, String(caught))
  assert.ok(!(caught instanceof RateLimitedError))
  assert.equal(caught.code, 'quota_exceeded')
  assert.equal(caught.errorType, 'insufficient_quota')
})

test('feed takes an ArrayBuffer, a DataView or any typed array as its window of bytes, as the SseParser does', () => {
  const bytes = fs.readFileSync(path.join(repoRoot, 'tests', 'fixtures', 'anthropic', 'basic_response.sse'))
  const reference = new StreamDecoder({ provider: 'anthropic' })
  reference.feed(bytes)
  const expected = reference.finish()
  const backing = new ArrayBuffer(bytes.length + 16)
  new Uint8Array(backing).fill(0x0a) // blank lines around the window: they must not be read
  new Uint8Array(backing, 8, bytes.length).set(bytes)
  const views = {
    ArrayBuffer: backing.slice(8, 8 + bytes.length),
    DataView: new DataView(backing, 8, bytes.length),
    Int8Array: new Int8Array(backing, 8, bytes.length),
  }
  for (const [kind, view] of Object.entries(views)) {
    const decoder = new StreamDecoder({ provider: 'anthropic' })
    decoder.feed(view)
    assert.deepEqual(decoder.finish(), expected, kind)
  }
  for (const bad of ['data: x\n\n', 42, null, [1, 2]]) {
    assert.throws(() => new StreamDecoder({ provider: 'anthropic' }).feed(bad), InvalidArgumentError)
  }
})

test('a feed after finish() throws InvalidStateError (invalid_state, as C and the core) and leaves the message alone', () => {
  // It used to decode the bytes as more of the finished stream ("a second `message_start`").
  const bytes = fs.readFileSync(path.join(repoRoot, 'tests', 'fixtures', 'anthropic', 'basic_response.sse'))
  const decoder = new StreamDecoder({ provider: 'anthropic' })
  decoder.feed(bytes)
  const message = decoder.finish()
  // It was an InvalidArgumentError (`code: 'invalid_argument'`) in Node only.
  assert.throws(
    () => decoder.feed(bytes),
    (err) => err instanceof InvalidStateError && err instanceof FerroloopError && err.code === 'invalid_state' && /finished/.test(err.message),
  )
  assert.deepEqual(decoder.finish(), message, 'a second finish answers the same')
  assert.deepEqual(decoder.message(), message)
})

test('mid-stream error events get the same codes as in Python (tests/decode/error_events.json)', () => {
  const { cases } = JSON.parse(fs.readFileSync(path.join(repoRoot, 'tests', 'decode', 'error_events.json'), 'utf8'))
  for (const { name, provider, stream, code } of cases) {
    const decoder = new StreamDecoder({ provider })
    let caught = null
    try {
      decoder.feed(Buffer.from(stream))
    } catch (err) {
      caught = err
    }
    assert.ok(caught instanceof FerroloopError, `${name}: ${caught}`)
    assert.equal(caught.code, code, name)
    assert.equal(caught.status, null, name)
  }
})

test('protocol violations and bad arguments raise typed errors', () => {
  const decoder = new StreamDecoder({ provider: 'anthropic' })
  assert.throws(
    () => decoder.feed(Buffer.from('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}\n\n')),
    ProtocolError,
  )
  assert.throws(() => new StreamDecoder({ provider: 'gemini' }), InvalidArgumentError)
  assert.throws(() => new StreamDecoder({ provider: 42 }), InvalidArgumentError)
  assert.throws(() => new StreamDecoder(null), InvalidArgumentError)
  assert.throws(() => new StreamDecoder({ provider: 'anthropic' }).feed('text'), InvalidArgumentError)
})

test('a decoder names its provider, as Python\'s StreamDecoder.provider does', () => {
  for (const provider of ['anthropic', 'openai-chat', 'openai-responses']) {
    assert.equal(new StreamDecoder({ provider }).provider, provider)
  }
})

test('without a provider a decoder decodes Anthropic\'s stream, as Python\'s StreamDecoder() and new Client() do', () => {
  // `new StreamDecoder()` threw InvalidArgumentError, where Python's StreamDecoder() (and
  // Node's own Client) default to 'anthropic'.
  const stream = fs.readFileSync(path.join(repoRoot, 'tests', 'fixtures', 'anthropic', 'basic_response.sse'))
  const expected = new StreamDecoder({ provider: 'anthropic' })
  expected.feed(stream)
  for (const decoder of [new StreamDecoder(), new StreamDecoder({}), new StreamDecoder({ provider: null }), new StreamDecoder({ events: false })]) {
    assert.equal(decoder.provider, 'anthropic')
    decoder.feed(stream)
    assert.deepEqual(decoder.finish(), expected.finish())
  }
})

// A message_start, then two events that are not JSON and a message_stop, in one chunk.
const TWO_BAD_EVENTS = Buffer.from(
  'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",' +
    '"role":"assistant","model":"x","content":[],"stop_reason":null,' +
    '"usage":{"input_tokens":1,"output_tokens":1}}}\n\n' +
    'event: content_block_delta\ndata: {first\n\n' +
    'event: content_block_delta\ndata: {second\n\n' +
    'event: message_stop\ndata: {"type":"message_stop"}\n\n',
)

test('finish() called again answers the same (the same message or the same error), as in Python and C', () => {
  // The second call used to decode the events queued behind the first failure: the first
  // finish() threw a ProtocolError, the second returned a message.
  const decoder = new StreamDecoder({ provider: 'anthropic' })
  assert.throws(() => decoder.feed(TWO_BAD_EVENTS), ProtocolError)
  const answers = []
  for (let i = 0; i < 3; i++) {
    assert.throws(
      () => decoder.finish(),
      (err) => {
        answers.push(`${err.code}: ${err.message}`)
        return err instanceof ProtocolError
      },
    )
  }
  assert.equal(new Set(answers).size, 1, answers.join(' | '))
  const truncated = new StreamDecoder({ provider: 'anthropic' })
  truncated.feed(TWO_BAD_EVENTS.subarray(0, TWO_BAD_EVENTS.indexOf('event: content_block_delta')))
  const partials = []
  for (let i = 0; i < 2; i++) {
    assert.throws(
      () => truncated.finish(),
      (err) => {
        partials.push(err.partial)
        return err instanceof StreamTruncatedError
      },
    )
  }
  assert.deepEqual(partials[0], partials[1])
  assert.equal(partials[0].id, 'm')
})

test('every event the decoders produce is a member of the DecodeEvent type, with exactly its fields', () => {
  const declared = memberLabels('DecodeEvent')
  assert.ok(declared.length >= 17, `${declared.length} members`)
  // Hand-written events for the members no recorded stream has: a ping, a citation, a delta of
  // an unknown type, an input that is not JSON, an event type the decoder does not know.
  const sse = (type, data) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`
  let rare = sse('message_start', {
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], model: 'm', stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } },
  })
  rare += sse('ping', { type: 'ping' })
  rare += sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
  rare += sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'citations_delta', citation: { type: 'char_location', cited_text: 'x' } } })
  rare += sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'future_delta', value: 1 } })
  rare += sse('content_block_stop', { type: 'content_block_stop', index: 0 })
  rare += sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'read', input: {} } })
  rare += sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"path": nope}' } })
  rare += sse('content_block_stop', { type: 'content_block_stop', index: 1 })
  rare += sse('future_event', { type: 'future_event', detail: 'x' })
  rare += sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 9 } })
  rare += sse('message_stop', { type: 'message_stop' })
  const streams = [...decodeCases(), { provider: 'anthropic', name: 'rare', bytes: Buffer.from(rare) }]
  const seen = new Set()
  for (const { provider, name, bytes } of streams) {
    for (const size of [Infinity, 7]) {
      for (const event of decodeAll(provider, bytes, size).events) {
        seen.add(assertDeclared(event, 'DecodeEvent', `${provider}/${name}: ${event.type}`))
      }
    }
  }
  const missing = declared.filter((label) => !seen.has(label))
  assert.deepEqual(missing, [], 'every member is produced by some stream (the type declares nothing the decoders never send)')
})

test('a detached buffer, or a view of one, is an InvalidArgumentError saying it has no bytes', () => {
  // A detached ArrayBuffer threw a bare TypeError (from `new Uint8Array`), and a view of one
  // read as an empty chunk: a chunk lost without a word.
  assertDetachedChunksRefused(() => new StreamDecoder({ provider: 'anthropic' }), 'StreamDecoder.feed')
})
