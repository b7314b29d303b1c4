'use strict'
// Errors thrown by ferroloop: one base class with a stable `code`, one subclass per code.
// The native layer tags its messages (`[ferroloop:<code>:<status>:<requestId>] message`, see
// node/src/error.rs); `toFerroloopError` decodes the tag into the matching subclass.

class FerroloopError extends Error {
  /**
   * @param {string} message
   * @param {{ code?: string | null, status?: number | null, requestId?: string | null, cause?: unknown }} [options]
   */
  constructor(message, given) {
    // null is no options, as `new Error(message, null)` takes it.
    const options = given ?? {}
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    // A subclass's code is its own (index.d.ts: "Always"): a `code` option naming another
    // would make `err instanceof TimeoutError` and `err.code` disagree. Only FerroloopError
    // itself takes the code given (a code this version has no class for).
    this.code = new.target.code ?? options.code ?? 'internal'
    this.status = options.status ?? null
    this.requestId = options.requestId ?? null
  }
}

const classes = {}
function define(name, code) {
  const cls = {
    [name]: class extends FerroloopError {},
  }[name]
  cls.code = code
  classes[code] = cls
  return cls
}

const InvalidArgumentError = define('InvalidArgumentError', 'invalid_argument')
// A call the object's state refuses (a feed after finish(), a submit after seal()): the core's
// and C's `invalid_state`, Python's InvalidStateError.
const InvalidStateError = define('InvalidStateError', 'invalid_state')
const InternalError = define('InternalError', 'internal')
const TimeoutError = define('TimeoutError', 'timeout')
const StreamTruncatedError = define('StreamTruncatedError', 'stream_truncated')
const ProtocolError = define('ProtocolError', 'protocol')
const RateLimitedError = define('RateLimitedError', 'rate_limited')
const QuotaExceededError = define('QuotaExceededError', 'quota_exceeded')
const OverloadedError = define('OverloadedError', 'overloaded')
const PromptTooLongError = define('PromptTooLongError', 'prompt_too_long')
// Named like the DOM's AbortError so `err.name === 'AbortError'` checks keep working.
const AbortError = define('AbortError', 'aborted')
const ProviderError = define('ProviderError', 'provider_error')
const AuthenticationError = define('AuthenticationError', 'authentication')
const PermissionError = define('PermissionError', 'permission')
const NotFoundError = define('NotFoundError', 'not_found')
const InvalidRequestError = define('InvalidRequestError', 'invalid_request')
const ServerError = define('ServerError', 'server')
const ConnectionError = define('ConnectionError', 'connection')
const UnsupportedError = define('UnsupportedError', 'unsupported')

const TAG = /^\[ferroloop:([a-z_]+):(\d*):([^\]]*)\] /
// napi-rs statuses raised while converting arguments (before any ferroloop code runs).
const ARGUMENT_STATUSES = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
  'DetachableArraybufferExpected',
])

/** The error `err` stands for, as a FerroloopError when it came from the native layer. */
function toFerroloopError(err) {
  if (err instanceof FerroloopError || !(err instanceof Error)) return err
  const tag = TAG.exec(err.message)
  if (tag !== null) {
    const [whole, code, status, requestId] = tag
    const Cls = classes[code] ?? FerroloopError
    const out = new Cls(err.message.slice(whole.length), {
      code,
      status: status === '' ? null : Number(status),
      requestId: requestId === '' ? null : requestId,
    })
    return out
  }
  if (typeof err.code === 'string' && ARGUMENT_STATUSES.has(err.code)) {
    return new InvalidArgumentError(err.message, { cause: err })
  }
  return err
}

/**
 * The FerroloopError of an error item from a native event stream
 * (`{ code, message, status, requestId, cause?, ...detail }`); the detail fields (`partial`,
 * `reason`, `errorType`, `retryAfterMs`) become properties of the error, an item `cause` its
 * `cause` (as a FerroloopError).
 */
function fromErrorItem(item, cause) {
  const { code, message, status, requestId, cause: itemCause, ...detail } = item
  // An item may carry its cause as an error item (a truncation's breaking failure).
  if (cause === undefined && itemCause !== null && typeof itemCause === 'object' && typeof itemCause.code === 'string') {
    cause = fromErrorItem(itemCause)
  }
  const Cls = classes[code] ?? FerroloopError
  const err = new Cls(message, { code, status, requestId, cause })
  for (const [key, value] of Object.entries(detail)) {
    if (value !== undefined) err[key] = value
  }
  return err
}

/** Node 20's String.prototype.isWellFormed / toWellFormed (Node 18 has neither). */
const hasWellFormed = typeof String.prototype.toWellFormed === 'function'
/** A lone surrogate (without the `u` flag a pattern matches code units, halves included). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

/**
 * `text` with each lone surrogate replaced by U+FFFD, as the native layer reads it; a
 * well-formed string is returned as it is, not copied (`isWellFormed` is a flag check for a
 * one-byte string).
 */
function wellFormed(text) {
  if (hasWellFormed) return text.isWellFormed() ? text : text.toWellFormed()
  return text.replace(LONE_SURROGATE, '\ufffd')
}

/**
 * `JSON.stringify(value, replacer)` for what crosses to the native layer as JSON text: a value
 * JSON cannot carry (a BigInt, a cycle, a throwing `toJSON`) is an InvalidArgumentError naming
 * `what`, not the bare TypeError of `JSON.stringify`. A lone surrogate is written as
 * JSON.stringify writes it (`\ud800`); the native layer reads that escape as U+FFFD (the core's
 * `json_text::from_str_lossy`), as napi converts a plain string. `replacer` (optional) is
 * JSON.stringify's.
 */
function toJson(value, what, replacer) {
  try {
    return stringify(value, replacer)
  } catch (err) {
    throw new InvalidArgumentError(`${what} cannot be sent as JSON: ${jsonFailure(err)}`, { cause: err })
  }
}

/** Why JSON.stringify threw `err` (its message); never throws. */
function jsonFailure(err) {
  try {
    return err instanceof Error ? err.message : String(err)
  } catch {
    return 'its toJSON threw'
  }
}

/**
 * `JSON.stringify(value, replacer)` with collections written as {@link collectionsReplacer}
 * writes them; throws what JSON.stringify throws (and the TypeError refusing a Map). A Set and
 * a Map are both written `{}` (as an empty object is): only then is the value written again,
 * its collections seen, so a large value without one is written once, at full speed.
 */
function stringify(value, replacer) {
  const json = JSON.stringify(value, replacer)
  if (json === undefined || !json.includes('{}')) return json
  return JSON.stringify(value, replacer === undefined ? collectionsReplacer : withCollections(replacer))
}

/**
 * The collections of what crosses as JSON (a request, a message, a tool's result or progress):
 * a Set is written as an array of its items, as Python writes a set; a Map is refused (its keys
 * need not be strings). JSON.stringify wrote both as `{}`: the data was lost without a word (a
 * message whose content was a Set of blocks counted as empty).
 */
function collectionsReplacer(_key, value) {
  if (value instanceof Set) return Array.from(value)
  if (value instanceof Map) throw new TypeError('a Map is not a JSON value (send Object.fromEntries(map))')
  return value
}

/** `replacer` (a JSON.stringify replacer function), collections first written as {@link collectionsReplacer} writes them. */
function withCollections(replacer) {
  return function (key, value) {
    return replacer.call(this, key, collectionsReplacer(key, value))
  }
}

/** How `value` is named in an error: `undefined`, `null`, `an array`, `a Map`, `a function`, ... */
function kindOf(value) {
  if (value === undefined || value === null) return String(value)
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') {
    const name = Object.getPrototypeOf(value)?.constructor?.name
    return name ? `a ${name}` : 'an object'
  }
  return `a ${typeof value}`
}

/**
 * `value` when it is a number, else an InvalidArgumentError naming `what` and what it got. NaN
 * and ±Infinity pass: the native layer says what is wrong with them. What napi refused in its
 * conversion ("Failed to convert napi value String into rust type `f64`") named neither the
 * argument nor the call.
 */
function numberArg(value, what) {
  if (typeof value !== 'number') throw new InvalidArgumentError(`${what} must be a number, got ${kindOf(value)}`)
  return value
}

/** An option that is `undefined` or `null` (not given), else a number (NaN refused), naming `what`. */
function optionalNumber(value, what) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || Number.isNaN(value)) throw new InvalidArgumentError(`${what} must be a number`)
  return value
}

/** An option that is `undefined` or `null` (not given), else a boolean, naming `what`. */
function optionalBoolean(value, what) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'boolean') throw new InvalidArgumentError(`${what} must be a boolean`)
  return value
}

/**
 * A directory option (`workspace`, `spillDir`) that is `undefined` or `null` (not given), else
 * a path: a string, or a `file:` URL (`new URL('./sandbox/', import.meta.url)`), which Node's
 * fs takes as a path and Python's `pathlib.Path` is the counterpart of. Anything else is an
 * InvalidArgumentError naming `what`.
 */
function optionalPath(value, what) {
  if (value === undefined || value === null || typeof value === 'string') return value ?? undefined
  if (value instanceof URL && value.protocol === 'file:') {
    try {
      return require('node:url').fileURLToPath(value)
    } catch (err) {
      throw new InvalidArgumentError(`${what}: ${err.message}`, { cause: err })
    }
  }
  throw new InvalidArgumentError(`${what} must be a string or a file: URL (a directory path)`)
}

/** An option that is `undefined` or `null` (not given), else a string, naming `what`. */
function optionalString(value, what) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'string') throw new InvalidArgumentError(`${what} must be a string`)
  return value
}

/** Whether `value` is a plain object (an object literal or of a null prototype; not a Map, an array, a Date or a buffer). */
function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * {@link toJson} for what is sent to a provider (a request, an agent's `extra`): a number JSON
 * has no form for (NaN, ±Infinity) is an InvalidArgumentError naming its key, where
 * JSON.stringify writes `null` and a `temperature: NaN` was sent as no temperature (Python
 * refuses such a float). The text is checked only when it holds a `null`, which every such
 * number becomes, so a request without one is written once.
 */
function providerJson(value, what) {
  const json = toJson(value, what)
  if (json !== undefined && json.includes('null')) toJson(value, what, refuseNonFinite)
  return json
}

function refuseNonFinite(key, value) {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new InvalidArgumentError(`${key === '' ? 'the value' : JSON.stringify(key)} is ${value}, which JSON has no form for (it would be sent as null)`)
  }
  return value
}

/**
 * The options argument of a call (`run(x, { signal })`): `{}` when absent, else it must be an
 * object (destructuring `null` in the parameter list threw a bare TypeError).
 */
function callOptions(options, what) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError(`${what}: the options must be an object`)
  return options
}

/**
 * Refuses a key of `options` that is not one of `known` (an array of names): a misspelt or
 * misplaced option (`timeoutMs` for `timeouts.totalMs`) would otherwise be ignored, and the
 * call would run with the default. Python refuses an unknown keyword, C an unknown key. Every
 * options object of the API is checked here (`what` names the call or class it was given to).
 */
function checkKeys(options, known, what) {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      const expected = known.length === 0 ? 'it takes none' : `the options are ${known.join(', ')}`
      throw new InvalidArgumentError(`${what}: unknown option ${JSON.stringify(key)} (${expected})`)
    }
  }
}

/**
 * The options argument `options` of `what` (absent: `{}`), its keys checked against `known`
 * and its null values dropped: the one check of every options object but Client's and Agent's
 * (whose options are required or nest).
 */
function checkedOptions(options, known, what) {
  const given = callOptions(options, what)
  checkKeys(given, known, what)
  return withoutNulls(given)
}

/** `options` without its null values: in options objects null means absent, as Python's None and C's null do. */
function withoutNulls(options) {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== null))
}

/** Calls `fn`, rethrowing native errors as FerroloopErrors. */
function callNative(fn) {
  try {
    return fn()
  } catch (err) {
    throw toFerroloopError(err)
  }
}

module.exports = {
  FerroloopError,
  InvalidArgumentError,
  InvalidStateError,
  InternalError,
  TimeoutError,
  StreamTruncatedError,
  ProtocolError,
  RateLimitedError,
  QuotaExceededError,
  OverloadedError,
  PromptTooLongError,
  AbortError,
  ProviderError,
  AuthenticationError,
  PermissionError,
  NotFoundError,
  InvalidRequestError,
  ServerError,
  ConnectionError,
  UnsupportedError,
  toFerroloopError,
  fromErrorItem,
  callNative,
  toJson,
  jsonFailure,
  stringify,
  providerJson,
  optionalNumber,
  numberArg,
  kindOf,
  optionalBoolean,
  optionalString,
  optionalPath,
  isPlainObject,
  wellFormed,
  callOptions,
  checkKeys,
  checkedOptions,
  withoutNulls,
}
