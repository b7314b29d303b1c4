'use strict'
// A FerroloopError subclass's `code` is its own, as index.d.ts declares (`readonly code:
// 'invalid_argument'`, "Always"): a `code` option does not change it. FerroloopError itself
// takes the code it is given.

const test = require('node:test')
const assert = require('node:assert/strict')
const ferroloop = require('..')

test("a subclass's code is fixed; FerroloopError's is the option's", () => {
  assert.equal(new ferroloop.InvalidArgumentError('x', { code: 'timeout' }).code, 'invalid_argument')
  assert.equal(new ferroloop.TimeoutError('x', { code: 'internal' }).code, 'timeout')
  assert.equal(new ferroloop.AbortError('x', { code: null }).code, 'aborted')
  assert.equal(new ferroloop.FerroloopError('x', { code: 'timeout' }).code, 'timeout')
  assert.equal(new ferroloop.FerroloopError('x', { code: 'some_future_code' }).code, 'some_future_code')
  assert.equal(new ferroloop.FerroloopError('x').code, 'internal')
  assert.equal(new ferroloop.FerroloopError('x', { code: null }).code, 'internal')
})
