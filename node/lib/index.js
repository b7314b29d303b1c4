'use strict'
// The public surface of the `ferroloop` package (CommonJS; lib/index.mjs re-exports it for ESM).

const native = require('../index.js')
const errors = require('./errors.js')
const { SseParser } = require('./sse.js')
const { ToolExecutor, Turn } = require('./exec.js')
const { StreamDecoder } = require('./decode.js')
const { estimateTokens, estimateRequest, ContextBudget, ContextTracker } = require('./tokens.js')

/** @internal Panics inside the native panic boundary (tests prove it becomes an InternalError). */
function _debugPanic(message) {
  return errors.callNative(() => native._debugPanic(message))
}

module.exports = {
  ...errors,
  SseParser,
  StreamDecoder,
  estimateTokens,
  estimateRequest,
  ContextBudget,
  ContextTracker,
  ToolExecutor,
  Turn,
  _debugPanic,
}
delete module.exports.callNative
