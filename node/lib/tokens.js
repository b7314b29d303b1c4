'use strict'
// Token estimation and context budgeting (ferroloop::tokens).

const native = require('../index.js')
const { InvalidArgumentError, callNative, toJson, checkedOptions, isPlainObject, numberArg, kindOf } = require('./errors.js')
const { attachedBytes } = require('./batch.js')

const BUDGET_OPTIONS = [
  'window',
  'maxOutputTokens',
  'model',
  'outputReserveCap',
  'autocompactBuffer',
  'warningBuffer',
  'blockingBuffer',
  'autocompactPercent',
]

/** The tokenizer of the options `{ tokenizer }` given to `what` (undefined: the default). */
function tokenizerOf(options, what) {
  // `null` options were taken as none here before the keys were checked: kept so.
  if (options === null) return undefined
  const { tokenizer } = checkedOptions(options, ['tokenizer'], what)
  if (tokenizer !== undefined && typeof tokenizer !== 'string') {
    throw new InvalidArgumentError(`${what}: tokenizer must be a string`)
  }
  return tokenizer
}

/**
 * `value` when it is a Uint8Array of any realm (the native layer reads any), else null.
 * `instanceof Uint8Array` is false for another realm's (a vm context's, the Buffers a Jest test
 * gets), which were refused as "not bytes" while SseParser.feed read them.
 */
function uint8Array(value) {
  if (value instanceof Uint8Array) return value
  return ArrayBuffer.isView(value) && value[Symbol.toStringTag] === 'Uint8Array' ? value : null
}

/**
 * `value` (a message of a tracker's history) as JSON: a plain object, else an
 * InvalidArgumentError naming `what`. A Map or a class instance was sent as `{}` and counted as
 * an empty message, `undefined` failed in the native conversion with a message naming neither.
 */
function messageJson(value, what) {
  if (!isPlainObject(value)) throw new InvalidArgumentError(`${what} must be a JSON object (a plain object), got ${kindOf(value)}`)
  return toJson(value, what)
}

/**
 * `value` (a system prompt or tool definitions) as JSON, or an InvalidArgumentError naming
 * `what` and what it takes (`expected`) when JSON has no form for it (`undefined`, a function).
 */
function requestPartJson(value, what, expected) {
  const json = toJson(value, what)
  if (json === undefined) throw new InvalidArgumentError(`${what} must be ${expected}, got ${kindOf(value)}`)
  return json
}

/**
 * Estimated tokens, for a tokenizer family (`claude` (default), `claude-legacy`, `o200k`,
 * `cl100k`), of a string or UTF-8 bytes (text), an array of messages, or an object: a request
 * body (with `messages`, `system` or `tools`, or an OpenAI Responses body's `input` or
 * `instructions`), a message (with a `role`) or a content block.
 */
function estimateTokens(input, options) {
  const tokenizer = tokenizerOf(options, 'estimateTokens')
  if (typeof input === 'string') return callNative(() => native.estimateText(input, tokenizer))
  const view = uint8Array(input)
  if (view !== null) {
    const bytes = attachedBytes(view, 'estimateTokens')
    return callNative(() => native.estimateBytes(bytes, tokenizer))
  }
  if (Array.isArray(input) || isPlainObject(input)) {
    return callNative(() => native.estimateJson(toJson(input, 'estimateTokens: the value'), tokenizer))
  }
  throw new InvalidArgumentError(
    'estimateTokens expects a string, a Uint8Array, an array of messages, a message, a content block or a request object',
  )
}

/**
 * Estimated tokens of a request body ({ system, tools, messages }, or an OpenAI Responses body:
 * { instructions, tools, input }), by part and in total.
 */
function estimateRequest(body, options) {
  const tokenizer = tokenizerOf(options, 'estimateRequest')
  if (body === null || typeof body !== 'object') throw new InvalidArgumentError('estimateRequest expects a request object')
  return callNative(() => native.estimateRequestJson(toJson(body, 'estimateRequest: the request'), tokenizer))
}

/**
 * A usage object's numbers as JSON: NaN and ±Infinity, which JSON cannot hold, cross as their
 * text, so the core refuses them naming the field (JSON.stringify made them null, which a usage
 * reads as absent: a NaN input made the usage "output only", ignored without a word).
 */
function nonFiniteAsText(_key, value) {
  return typeof value === 'number' && !Number.isFinite(value) ? String(value) : value
}

/** Context thresholds for one model (Claude Code's defaults, every field configurable). */
class ContextBudget {
  #native

  constructor(options) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('ContextBudget needs { window, maxOutputTokens } or { model }')
    }
    const checked = checkedOptions(options, BUDGET_OPTIONS, 'ContextBudget')
    for (const [key, value] of Object.entries(checked)) {
      // undefined, as null, is an option not given.
      if (value === undefined) continue
      if (key !== 'model') numberArg(value, `ContextBudget: ${key}`)
      else if (typeof value !== 'string') throw new InvalidArgumentError(`ContextBudget: model must be a string, got ${kindOf(value)}`)
    }
    this.#native = callNative(() => new native.ContextBudget(checked))
  }

  get window() {
    return this.#native.window
  }
  get maxOutputTokens() {
    return this.#native.maxOutputTokens
  }
  get effectiveWindow() {
    return this.#native.effectiveWindow
  }
  get autocompactThreshold() {
    return this.#native.autocompactThreshold
  }
  get warningThreshold() {
    return this.#native.warningThreshold
  }
  get blockingThreshold() {
    return this.#native.blockingThreshold
  }
  /** 'ok' | 'warning' | 'auto_compact' | 'blocking' */
  state(tokens) {
    numberArg(tokens, 'tokens')
    return callNative(() => this.#native.state(tokens))
  }
  percentLeft(tokens) {
    numberArg(tokens, 'tokens')
    return callNative(() => this.#native.percentLeft(tokens))
  }
}

/** Tracks a conversation's token size: provider usage for the covered prefix, estimates after. */
class ContextTracker {
  #native

  constructor(options) {
    const tokenizer = tokenizerOf(options, 'ContextTracker')
    this.#native = callNative(() => new native.ContextTracker(tokenizer))
  }

  get tokenizer() {
    return this.#native.tokenizer
  }
  setSystem(system) {
    const json = requestPartJson(system, 'setSystem: the system prompt', 'a string, an array of blocks or null')
    callNative(() => this.#native.setSystemJson(json))
  }
  setTools(tools) {
    const json = requestPartJson(tools, 'setTools: the tools', 'an array or null')
    callNative(() => this.#native.setToolsJson(json))
  }
  pushMessage(message) {
    const json = messageJson(message, 'pushMessage: the message')
    callNative(() => this.#native.pushMessageJson(json))
  }
  replaceMessages(messages) {
    if (!Array.isArray(messages)) throw new InvalidArgumentError('replaceMessages expects an array')
    messages.forEach((message, i) => {
      if (!isPlainObject(message)) {
        throw new InvalidArgumentError(`replaceMessages: message ${i} must be a JSON object (a plain object), got ${kindOf(message)}`)
      }
    })
    callNative(() => this.#native.replaceMessagesJson(toJson(messages, 'replaceMessages: the messages')))
  }
  truncate(length) {
    numberArg(length, 'length')
    callNative(() => this.#native.truncate(length))
  }
  get length() {
    return this.#native.length
  }
  /** Records a response's usage covering the first `covered` messages (default: all). */
  recordUsage(usage, covered) {
    if (usage === null || typeof usage !== 'object') throw new InvalidArgumentError('usage must be an object')
    if (covered !== undefined && covered !== null) numberArg(covered, 'covered')
    callNative(() => this.#native.recordUsageJson(toJson(usage, 'recordUsage: the usage', nonFiniteAsText), covered))
  }
  get correction() {
    return this.#native.correction
  }
  set correction(value) {
    numberArg(value, 'the correction factor')
    callNative(() => {
      this.#native.correction = value
    })
  }
  get model() {
    return this.#native.model
  }
  /** Selects the model the next requests go to (each model learns its own correction). */
  set model(value) {
    if (typeof value !== 'string') throw new InvalidArgumentError('model must be a string')
    callNative(() => {
      this.#native.model = value
    })
  }
  correctionFor(model) {
    if (typeof model !== 'string') throw new InvalidArgumentError('correctionFor expects a model name (a string)')
    return callNative(() => this.#native.correctionFor(model))
  }
  /** { tokens, method: 'exact' | 'usage+estimate' | 'estimate' } */
  tokens() {
    return callNative(() => this.#native.tokens())
  }
  get bytesEstimated() {
    return this.#native.bytesEstimated
  }
}

/**
 * The token estimate of a text fed in pieces (a file read in chunks, a child process's output):
 * what `estimateTokens` gives for the whole text, in memory bounded by its longest line (a
 * line over 1 MiB is counted in 1 MiB pieces, a token or so apart per piece).
 */
class TextEstimator {
  #native
  /**
   * The high surrogate that ended the last string piece ('' when none): the low half of its
   * pair may begin the next piece, and sent alone it would count as U+FFFD.
   */
  #highSurrogate = ''

  constructor(options) {
    const tokenizer = tokenizerOf(options, 'TextEstimator')
    this.#native = callNative(() => new native.TextEstimator(tokenizer))
  }
  /**
   * Adds the next piece: a string (it may end between the halves of a surrogate pair), or UTF-8
   * bytes (a character may be split between pieces).
   */
  feed(piece) {
    if (typeof piece === 'string') {
      let text = this.#highSurrogate + piece
      this.#highSurrogate = ''
      if (isHighSurrogate(text.charCodeAt(text.length - 1))) {
        this.#highSurrogate = text.slice(-1)
        text = text.slice(0, -1)
        if (text === '') return
      }
      return callNative(() => this.#native.feedText(text))
    }
    const view = uint8Array(piece)
    if (view !== null) {
      const bytes = attachedBytes(view, 'TextEstimator.feed')
      // Bytes cannot complete a held high surrogate: it stays lone (U+FFFD).
      this.#sendHighSurrogate()
      return callNative(() => this.#native.feedBytes(bytes))
    }
    throw new InvalidArgumentError('TextEstimator.feed expects a string or a Uint8Array')
  }
  /** The estimate of the text fed so far (0 for none). */
  estimate() {
    const tail = this.#highSurrogate
    // A held high surrogate is part of the text so far (a lone one, until its pair completes).
    if (tail !== '') return callNative(() => this.#native.estimateWith(tail))
    return callNative(() => this.#native.estimate())
  }

  #sendHighSurrogate() {
    if (this.#highSurrogate === '') return
    const tail = this.#highSurrogate
    this.#highSurrogate = ''
    callNative(() => this.#native.feedText(tail))
  }
}

/** Whether UTF-16 code unit `unit` is the first (high) half of a surrogate pair. */
const isHighSurrogate = (unit) => unit >= 0xd800 && unit <= 0xdbff

/**
 * Exact tokens of `text` for `o200k` or `cl100k`. Throws an UnsupportedError for the families
 * with no offline vocabulary (the Claude families, in every build, with the core's reason), and
 * for the others when the addon was built without the cargo feature `exact`
 * (`hasExactCounting()` tells).
 */
function countTokens(text, tokenizer) {
  if (typeof text !== 'string') throw new InvalidArgumentError('countTokens expects a string')
  if (typeof tokenizer !== 'string') throw new InvalidArgumentError("countTokens needs a tokenizer ('o200k' or 'cl100k')")
  return callNative(() => native.countTokens(text, tokenizer))
}

/** Whether this build of the addon counts tokens exactly (`countTokens`; the cargo feature `exact`). */
function hasExactCounting() {
  return callNative(() => native.hasExactCounting())
}

module.exports = { estimateTokens, estimateRequest, countTokens, hasExactCounting, ContextBudget, ContextTracker, TextEstimator }
