'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')

const { SseParser, InvalidArgumentError, FerroloopError, toFerroloopError } = require('../lib/index.js')
const { feedAll, sseFixtures, conformanceVectors, assertDetachedChunksRefused } = require('./helpers.js')

const CHUNKINGS = [Infinity, 1, 2, 3, 7, 64, 4096]

test('shared fixtures decode to the expected events at every chunking', () => {
  const fixtures = sseFixtures()
  assert.ok(fixtures.length >= 7, `found ${fixtures.length} fixtures`)
  for (const { name, bytes, expected } of fixtures) {
    const expectedEvents = expected.filter((item) => !('retry' in item))
    for (const size of CHUNKINGS) {
      const parser = new SseParser()
      const events = feedAll(parser, bytes, size)
      assert.deepEqual(events, expectedEvents, `${name} at chunk size ${size}`)
      parser.finish()
    }
  }
})

test('WHATWG conformance vectors pass at every chunking', () => {
  const vectors = conformanceVectors()
  assert.ok(vectors.length > 50)
  for (const { name, bytes, expected } of vectors) {
    const expectedEvents = expected.filter((item) => !('retry' in item))
    const retries = expected.filter((item) => 'retry' in item)
    const lastRetry = retries.length === 0 ? null : retries[retries.length - 1].retry
    for (const size of CHUNKINGS) {
      const parser = new SseParser()
      const events = feedAll(parser, bytes, size)
      parser.finish()
      assert.deepEqual(events, expectedEvents, `${name} at chunk size ${size}`)
      assert.equal(parser.retry, lastRetry, `${name} retry at chunk size ${size}`)
    }
  }
})

test('feed returns exactly the events each chunk completes', () => {
  const parser = new SseParser()
  assert.deepEqual(parser.feed(Buffer.from('event: a\ndata: 1')), [])
  assert.deepEqual(parser.feed(Buffer.from('\n\ndata: 2\n\nda')), [
    { event: 'a', data: '1', id: '' },
    { event: 'message', data: '2', id: '' },
  ])
  assert.deepEqual(parser.feed(new Uint8Array(Buffer.from('ta: 3\n\n'))), [
    { event: 'message', data: '3', id: '' },
  ])
})

test('ids persist, empty id resets, retry and lastEventId are exposed', () => {
  const parser = new SseParser()
  const events = parser.feed(Buffer.from('id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 9\n\n'))
  assert.deepEqual(
    events.map((e) => e.id),
    ['7', '7', ''],
  )
  assert.equal(parser.retry, 1500)
  // The blank line after `id: 9` dispatches no event but commits the id.
  assert.equal(parser.lastEventId, '9')
})

test('lastEventId changes only when a blank line commits an id; finish discards a pending one', () => {
  // WHATWG: an `id` field sets the "last event ID buffer"; a blank line copies it to the "last
  // event ID string" (what events carry, what a reconnection sends); an unterminated event, its
  // `id` included, is discarded at the end of the stream.
  const parser = new SseParser()
  assert.deepEqual(parser.feed(Buffer.from('data: a\n\nid: 7\n')).map((e) => e.id), [''])
  assert.equal(parser.lastEventId, '')
  assert.equal(parser.finish(), true)
  assert.equal(parser.lastEventId, '')
  assert.deepEqual(parser.feed(Buffer.from('data: b\n\n')).map((e) => e.id), [''])

  const lone = new SseParser()
  assert.deepEqual(lone.feed(Buffer.from('id: 7\n')), [])
  assert.equal(lone.finish(), true)
  assert.equal(lone.lastEventId, '')
})

test('events with the same type but different ids and empty data slice correctly', () => {
  const parser = new SseParser()
  const input = 'event: t\ndata:\nid:\n\nevent: t\ndata:\nid: 1\n\nevent: t\ndata: 😀\nid: 1\n\n'
  assert.deepEqual(parser.feed(Buffer.from(input)), [
    { event: 't', data: '', id: '' },
    { event: 't', data: '', id: '1' },
    { event: 't', data: '😀', id: '1' },
  ])
})

test('invalid UTF-8 becomes U+FFFD and multi-byte characters survive any split', () => {
  const bytes = Buffer.concat([Buffer.from('data: a'), Buffer.from([0xff]), Buffer.from('é日😀\n\n')])
  for (const size of [1, 2, 3, Infinity]) {
    assert.deepEqual(feedAll(new SseParser(), bytes, size), [{ event: 'message', data: 'a\uFFFDé日😀', id: '' }])
  }
})

test('finish discards an unterminated event and reports it', () => {
  const parser = new SseParser()
  assert.deepEqual(parser.feed(Buffer.from('data: complete\n\ndata: partial')), [
    { event: 'message', data: 'complete', id: '' },
  ])
  assert.equal(parser.finish(), true)
  assert.equal(parser.finish(), false)
  // A new stream after finish (reconnection) parses from a clean state.
  assert.deepEqual(parser.feed(Buffer.from('data: next\n\n')), [{ event: 'message', data: 'next', id: '' }])
})

test('maxEventBytes drops oversized events and resumes', () => {
  const parser = new SseParser({ maxEventBytes: 16 })
  const events = parser.feed(Buffer.from(`data: ${'x'.repeat(100)}\n\ndata: ok\n\n`))
  assert.deepEqual(events, [{ event: 'message', data: 'ok', id: '' }])
  assert.equal(parser.droppedEvents, 1)
})

/** The same bytes as every kind of binary view, each a window of a larger buffer. */
function binaryViews(text) {
  const bytes = Buffer.from(text)
  const backing = new ArrayBuffer(bytes.length + 12)
  new Uint8Array(backing).fill(0x78) // 'x' around the window: a view must read only its own bytes
  new Uint8Array(backing, 8, bytes.length).set(bytes)
  return {
    ArrayBuffer: backing.slice(8, 8 + bytes.length),
    DataView: new DataView(backing, 8, bytes.length),
    Int8Array: new Int8Array(backing, 8, bytes.length),
    Uint8ClampedArray: new Uint8ClampedArray(backing, 8, bytes.length),
    Uint8ArraySubarray: new Uint8Array(backing).subarray(8, 8 + bytes.length),
  }
}

test('feed takes any binary view (ArrayBuffer, DataView, typed arrays) as its window of bytes, as Python takes any buffer', () => {
  // `await response.arrayBuffer()` or a DataView used to throw "expects a Buffer or Uint8Array".
  const text = 'event: a\ndata: one\n\ndata: two\n\n'
  for (const [kind, view] of Object.entries(binaryViews(text))) {
    const parser = new SseParser()
    assert.deepEqual(
      parser.feed(view),
      [
        { event: 'a', data: 'one', id: '' },
        { event: 'message', data: 'two', id: '' },
      ],
      kind,
    )
    assert.equal(parser.bytesFed, Buffer.byteLength(text), kind)
  }
})

test('bad arguments raise InvalidArgumentError', () => {
  const parser = new SseParser()
  for (const bad of ['data: x\n\n', 42, null, undefined, [1, 2]]) {
    assert.throws(
      () => parser.feed(bad),
      (err) => err instanceof InvalidArgumentError && err instanceof FerroloopError && err.code === 'invalid_argument',
    )
  }
  for (const bad of [{ maxEventBytes: 0 }, { maxEventBytes: 1.5 }, { maxEventBytes: -3 }, { maxEventBytes: 'x' }]) {
    assert.throws(() => new SseParser(bad), (err) => err.code === 'invalid_argument', JSON.stringify(bad))
  }
})

test('a chunk completing thousands of events returns them all (offset array growth)', () => {
  const parser = new SseParser()
  for (const count of [3000, 10, 7000]) {
    const input = Array.from({ length: count }, (_, i) => `event: e${i % 3}\nid: ${i >> 2}\ndata: ${i}é\n\n`).join('')
    const events = parser.feed(Buffer.from(input))
    assert.equal(events.length, count)
    events.forEach((ev, i) => assert.deepEqual(ev, { event: `e${i % 3}`, data: `${i}é`, id: String(i >> 2) }))
  }
})

test('the native batch call refuses an offsets array overlapping the chunk', () => {
  const native = require('../index.js')
  const parser = new native.SseParser()
  const shared = new ArrayBuffer(64)
  const chunk = new Uint8Array(shared, 0, 32)
  chunk.set(Buffer.from('data: x\n\n'))
  assert.throws(
    () => parser.feedBatch(chunk, new Uint8Array(shared, 16, 32)),
    (err) => toFerroloopError(err).code === 'invalid_argument',
  )
  assert.throws(() => parser.feedBatch(chunk, new Uint8Array(3)), (err) => toFerroloopError(err).code === 'invalid_argument')
})

// ---- the batch path against an independent reference, at every small chunking ------------------

/** A direct transcription of the WHATWG event-stream interpretation, over the decoded text. */
function referenceEvents(bytes) {
  let text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes)
  if (text.startsWith('\uFEFF')) text = text.slice(1)
  const events = []
  let data = ''
  let type = ''
  let lastId = ''
  const lines = text.split(/\r\n|\r|\n/)
  // The text after the last line end is an unterminated line: never processed.
  lines.pop()
  for (const line of lines) {
    if (line === '') {
      if (data !== '') {
        events.push({ event: type || 'message', data: data.slice(0, -1), id: lastId })
      }
      data = ''
      type = ''
      continue
    }
    if (line.startsWith(':')) continue
    const colon = line.indexOf(':')
    const name = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (name === 'data') data += `${value}\n`
    else if (name === 'event') type = value
    else if (name === 'id' && !value.includes('\0')) lastId = value
  }
  return events
}

/** A deterministic stream exercising multi-byte characters, invalid bytes, CR/LF/CRLF line ends,
 * multi-line data, long data spanning chunks, repeated and changing types and ids, and a BOM. */
function trickyStream(seed) {
  let state = seed
  const next = (n) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return (state >>> 8) % n
  }
  const pieces = ['é', '日本語', '😀', 'ascii', ' ', '\u{10FFFF}', 'naïve', '\u0080', 'x'.repeat(40), '会话']
  const ends = ['\n', '\r\n', '\r']
  const parts = [Buffer.from([0xef, 0xbb, 0xbf])]
  for (let e = 0; e < 60; e++) {
    const end = ends[next(3)]
    if (next(3) === 0) parts.push(Buffer.from(`event: ${next(2) ? 'delta' : 'typ€'}${end}`))
    if (next(5) === 0) parts.push(Buffer.from(`id: ${next(4)}${end}`))
    if (next(9) === 0) parts.push(Buffer.from(`: comment ${pieces[next(pieces.length)]}${end}`))
    const lines = 1 + (next(4) === 0 ? next(3) : 0)
    for (let l = 0; l < lines; l++) {
      let value = ''
      const words = next(12)
      for (let w = 0; w < words; w++) value += pieces[next(pieces.length)]
      if (next(50) === 0 || (e === 30 && l === 0)) value += 'y'.repeat(5000)
      parts.push(Buffer.from(`data: ${value}`))
      // Invalid UTF-8 now and then: a lone continuation byte or a truncated sequence.
      if (next(10) === 0) parts.push(Buffer.from(next(2) ? [0x80] : [0xe6, 0x97]))
      parts.push(Buffer.from(end))
    }
    parts.push(Buffer.from(end))
  }
  return Buffer.concat(parts)
}

test('the batch path matches a reference parser at 1, 2, 3, 7, 16 and odd chunk sizes', () => {
  for (const seed of [1, 2, 3, 42]) {
    const bytes = trickyStream(seed)
    const expected = referenceEvents(bytes)
    assert.ok(expected.length > 40, `seed ${seed}: ${expected.length} events`)
    assert.ok(expected.some((e) => e.data.length > 5000))
    assert.ok(expected.some((e) => e.data.includes('\uFFFD')))
    assert.ok(expected.some((e) => e.data.includes('\n')))
    for (const size of [Infinity, 1, 2, 3, 7, 16, 61, 1460]) {
      assert.deepEqual(feedAll(new SseParser(), bytes, size), expected, `seed ${seed} at chunk size ${size}`)
    }
  }
})

test('event types stay right across batches, past the interned-type table and with non-ASCII types', () => {
  // 150 distinct types (more than the 64 the native side interns), revisited out of order, in
  // runs and alone, so references, texts and shared spans all occur within and across batches.
  let stream = ''
  for (let e = 0; e < 900; e++) {
    const n = e < 300 ? e % 150 : (e * 37) % 150
    const type = n % 10 === 0 ? `typ€-${n}` : `type-${n}`
    stream += (e % 4 === 0 ? '' : `event: ${type}\n`) + `data: ${e} ${'é'.repeat(e % 3)}\n\n`
    if (e % 5 === 0) stream += `event: type-${n}\ndata: again\n\n`
  }
  const bytes = Buffer.from(stream)
  const expected = referenceEvents(bytes)
  assert.equal(expected.length, 1080)
  for (const size of [Infinity, 1, 7, 61, 300, 1460]) {
    assert.deepEqual(feedAll(new SseParser(), bytes, size), expected, `chunk size ${size}`)
  }
})

test('a type sent as text past the full table keeps its name after an interned type in the same batch', () => {
  // The table fills with t0..t63; X then travels as a span, shared by its two events, with a
  // reference to t0 between them.
  const parser = new SseParser()
  let fill = ''
  for (let i = 0; i < 64; i++) fill += `event: t${i}\ndata: x\n\n`
  assert.equal(parser.feed(Buffer.from(fill)).length, 64)
  const events = parser.feed(Buffer.from('event: X\ndata: 1\n\nevent: t0\ndata: 2\n\nevent: X\ndata: 3\n\n'))
  assert.deepEqual(
    events.map((e) => [e.event, e.data]),
    [['X', '1'], ['t0', '2'], ['X', '3']],
  )
})

test('multi-byte characters split across chunks at every offset keep their UTF-16 indices', () => {
  // ASCII before and after, so a wrong byte-versus-UTF-16 offset shows in the slices.
  const input = Buffer.from('event: é\nid: 日\ndata: a😀b\ndata: 語c\n\ndata: plain\n\nevent: ✅\ndata: 😀\n\n')
  const expected = [
    { event: 'é', data: 'a😀b\n語c', id: '日' },
    { event: 'message', data: 'plain', id: '日' },
    { event: '✅', data: '😀', id: '日' },
  ]
  for (let cut = 1; cut < input.length; cut++) {
    for (let cut2 = cut; cut2 < input.length; cut2 += 5) {
      const parser = new SseParser()
      const events = [
        ...parser.feed(input.subarray(0, cut)),
        ...parser.feed(input.subarray(cut, cut2)),
        ...parser.feed(input.subarray(cut2)),
      ]
      assert.deepEqual(events, expected, `cuts at ${cut} and ${cut2}`)
    }
  }
})

test('ASCII and non-ASCII events mixed in one batch slice correctly (Latin-1 and UTF-16 batches)', () => {
  const parser = new SseParser()
  const ascii = parser.feed(Buffer.from('event: t\ndata: one\n\ndata: two\n\n'))
  assert.deepEqual(ascii, [
    { event: 't', data: 'one', id: '' },
    { event: 'message', data: 'two', id: '' },
  ])
  const mixed = parser.feed(Buffer.from('data: three\n\ndata: 四\n\ndata: five\n\nevent: t\ndata: 😀six\n\n'))
  assert.deepEqual(mixed, [
    { event: 'message', data: 'three', id: '' },
    { event: 'message', data: '四', id: '' },
    { event: 'message', data: 'five', id: '' },
    { event: 't', data: '😀six', id: '' },
  ])
  // Back to an all-ASCII batch after a wide one.
  assert.deepEqual(parser.feed(Buffer.from('data: seven\n\n')), [{ event: 'message', data: 'seven', id: '' }])
})

test('bytesFed counts every byte fed, like Python bytes_fed', () => {
  const parser = new SseParser()
  assert.equal(parser.bytesFed, 0)
  parser.feed(Buffer.from('data: a'))
  parser.feed(new Uint8Array(0))
  parser.feed(Buffer.from('bc\n\n: comment\n'))
  assert.equal(parser.bytesFed, 7 + 14)
})

test('a detached buffer, or a view of one, is an InvalidArgumentError saying it has no bytes', () => {
  // A detached ArrayBuffer threw a bare TypeError (from `new Uint8Array`), and a view of one
  // read as an empty chunk: a chunk lost without a word.
  assertDetachedChunksRefused(() => new SseParser(), 'SseParser.feed')
})
