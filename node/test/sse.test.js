'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')

const { SseParser, InvalidArgumentError, FerroloopError, toFerroloopError } = require('../lib/index.js')
const { feedAll, sseFixtures, conformanceVectors } = require('./helpers.js')

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
  const events = parser.feed(Buffer.from('id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 9\n'))
  assert.deepEqual(
    events.map((e) => e.id),
    ['7', '7', ''],
  )
  assert.equal(parser.retry, 1500)
  assert.equal(parser.lastEventId, '9')
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
    () => parser.feedBatch(chunk, new Uint32Array(shared, 16, 8)),
    (err) => toFerroloopError(err).code === 'invalid_argument',
  )
  assert.throws(() => parser.feedBatch(chunk, new Uint32Array(0)), (err) => toFerroloopError(err).code === 'invalid_argument')
})
