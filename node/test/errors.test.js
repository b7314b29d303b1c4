'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')

const ferroloop = require('../lib/index.js')
const { FerroloopError, InternalError, RateLimitedError, toFerroloopError } = ferroloop

test('a Rust panic surfaces as FerroloopError code internal and the process lives on', () => {
  for (let i = 0; i < 3; i++) {
    assert.throws(
      () => ferroloop._debugPanic('deliberate test panic'),
      (err) =>
        err instanceof InternalError &&
        err instanceof FerroloopError &&
        err instanceof Error &&
        err.code === 'internal' &&
        err.name === 'InternalError' &&
        err.status === null &&
        err.requestId === null &&
        err.message.includes('deliberate test panic'),
    )
  }
  // The addon still works after the panics.
  const events = new ferroloop.SseParser().feed(Buffer.from('data: alive\n\n'))
  assert.equal(events[0].data, 'alive')
})

test('tagged native errors decode into subclasses with status and requestId', () => {
  const err = toFerroloopError(new Error('[ferroloop:rate_limited:429:req_01:x] slow down'))
  assert.ok(err instanceof RateLimitedError)
  assert.equal(err.code, 'rate_limited')
  assert.equal(err.status, 429)
  assert.equal(err.requestId, 'req_01:x')
  assert.equal(err.message, 'slow down')

  const unknown = toFerroloopError(new Error('[ferroloop:some_future_code::] later'))
  assert.ok(unknown instanceof FerroloopError)
  assert.equal(unknown.code, 'some_future_code')

  const plain = new TypeError('not ours')
  assert.equal(toFerroloopError(plain), plain)
})

test('every code has a subclass with a stable code', () => {
  const expected = {
    InvalidArgumentError: 'invalid_argument',
    InternalError: 'internal',
    TimeoutError: 'timeout',
    StreamTruncatedError: 'stream_truncated',
    ProtocolError: 'protocol',
    RateLimitedError: 'rate_limited',
    QuotaExceededError: 'quota_exceeded',
    OverloadedError: 'overloaded',
    PromptTooLongError: 'prompt_too_long',
    AbortError: 'aborted',
  }
  for (const [name, code] of Object.entries(expected)) {
    const Cls = ferroloop[name]
    const err = new Cls('m', { status: 503, requestId: 'r' })
    assert.ok(err instanceof FerroloopError, name)
    assert.equal(err.code, code)
    assert.equal(err.name, name)
    assert.equal(err.status, 503)
    assert.equal(err.requestId, 'r')
  }
})

test('an error constructed with null options is one without options, as new Error(message, null) is', () => {
  // `options = {}` defaulted only undefined: null threw "Cannot read properties of null".
  for (const Cls of [FerroloopError, RateLimitedError]) {
    const err = new Cls('slow down', null)
    assert.deepEqual([err.message, err.code, err.status, err.requestId, 'cause' in err], ['slow down', Cls === FerroloopError ? 'internal' : 'rate_limited', null, null, false])
  }
})
