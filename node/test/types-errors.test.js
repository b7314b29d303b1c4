'use strict'
// The detail fields of errors are declared on their classes (types-errors.ts, compiled here with
// `tsc --strict`), and are there at runtime (a decoder's errors, checked here; the client's are
// checked by client.test.js and client-cause.test.js).

const test = require('node:test')
const assert = require('node:assert/strict')
const { assertTypeChecks } = require('./helpers.js')
const { StreamDecoder, OverloadedError, StreamTruncatedError } = require('..')

test('types-errors.ts type-checks under tsc --strict (error detail fields declared on their classes)', () => {
  assertTypeChecks('types-errors.ts')
})

test('a decoder\'s errors carry the declared fields', () => {
  const start = 'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
  const overloaded = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
  const decoder = new StreamDecoder()
  const err = (() => {
    try {
      decoder.feed(Buffer.from(start + overloaded))
    } catch (e) {
      return e
    }
  })()
  assert.ok(err instanceof OverloadedError)
  assert.equal(err.errorType, 'overloaded_error')
  assert.deepEqual(err.raw, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })
  assert.equal(err.partial.id, 'm')
  assert.deepEqual(err.events.map((e) => e.type), ['message_start'])
  const truncated = new StreamDecoder()
  truncated.feed(Buffer.from(start))
  assert.throws(() => truncated.finish(), (e) => e instanceof StreamTruncatedError && e.partial.id === 'm' && Array.isArray(e.events))
})
