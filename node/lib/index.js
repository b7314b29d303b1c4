'use strict'
// The public surface of the `ferroloop` package (CommonJS; lib/index.mjs re-exports it for ESM).

const native = require('../index.js')
const errors = require('./errors.js')
const { SseParser } = require('./sse.js')
const { ToolExecutor, Turn } = require('./exec.js')
const { StreamDecoder } = require('./decode.js')
const { estimateTokens, estimateRequest, countTokens, hasExactCounting, ContextBudget, ContextTracker, TextEstimator } = require('./tokens.js')
const { Client, MessageStream } = require('./client.js')
const { Agent, AgentRun } = require('./agent.js')

/** @internal Panics inside the native panic boundary (tests prove it becomes an InternalError). */
function _debugPanic(message) {
  return errors.callNative(() => native._debugPanic(message))
}

/** @internal Arms (or disarms) a panic at every native entry point (used by the test suite). */
function _debugArmPanics(armed) {
  native._debugArmPanics(Boolean(armed))
}

module.exports = {
  ...errors,
  SseParser,
  StreamDecoder,
  estimateTokens,
  estimateRequest,
  countTokens,
  hasExactCounting,
  ContextBudget,
  ContextTracker,
  TextEstimator,
  ToolExecutor,
  Turn,
  Client,
  MessageStream,
  Agent,
  AgentRun,
  _debugPanic,
  _debugArmPanics,
}
delete module.exports.callNative
delete module.exports.fromErrorItem
delete module.exports.toJson
delete module.exports.stringify
delete module.exports.jsonFailure
delete module.exports.providerJson
delete module.exports.optionalNumber
delete module.exports.numberArg
delete module.exports.kindOf
delete module.exports.optionalBoolean
delete module.exports.optionalString
delete module.exports.optionalPath
delete module.exports.isPlainObject
delete module.exports.callOptions
delete module.exports.checkKeys
delete module.exports.checkedOptions
delete module.exports.withoutNulls
delete module.exports.wellFormed
