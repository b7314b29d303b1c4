'use strict'
// The JavaScript half of the tool calls (node/src/js_tools.rs): a turn's poll hands over the
// calls to start and to abort; `start` runs the tool and reports its settled value through
// `complete(callId, flags, content)`. A call never throws nor rejects: every outcome, including a thrown
// error, becomes a ToolReply the executor turns into a `tool_result` block.

const { AsyncResource } = require('node:async_hooks')
const { AbortError, TimeoutError, InvalidArgumentError, toJson, stringify } = require('./errors.js')

/**
 * The input of a submitted `tool_use` block: `{}` when it has none, the core's rule
 * (`ferroloop::exec::ToolUse`, which Python and C apply through the core); an explicit `null`
 * is kept (the call then gets an invalid-input error result). Applied here, in the core's
 * words, only because a call's input stays in JS when the native side has no need of it.
 */
const inputOf = (use) => (use.input === undefined ? {} : use.input)

/**
 * The JSON text of a progress report. Data JSON cannot carry (a BigInt, a cycle, a throwing
 * `toJSON`, a function or a symbol) throws an InvalidArgumentError to the tool, as Python's
 * `ctx.progress` raises ValueError, rather than being dropped unseen.
 */
function progressJson(data) {
  // A Set is sent as an array, a Map refused (toJson's collections).
  const json = toJson(data ?? null, 'ctx.progress: the data')
  if (json === undefined) {
    throw new InvalidArgumentError(`ctx.progress: the data cannot be sent as JSON: a ${typeof data} is not a JSON value`)
  }
  return json
}

// Reply flags (node/src/js_tools.rs): the tool failed; the content is JSON text of content
// blocks; the item is a progress report (its content is the data).
const FLAG_ERROR = 1
const FLAG_BLOCKS = 2
const FLAG_PROGRESS = 4

/** A result a tool returned that cannot be sent: its text is ferroloop's own, reported as it is. */
class UnsendableResult extends TypeError {}

/**
 * What a tool returned, as `complete(callId, flags, content)` arguments: [flags, content]. The
 * content is always a string (the settlement batches measure it with `.length`); a value that
 * has none throws, and the caller makes the throw an error reply.
 */
function toReply(value) {
  if (typeof value === 'string') return [0, value]
  if (value === undefined || value === null) return [0, '']
  if (Array.isArray(value)) {
    // `toJSON` may make an array serialize to nothing.
    const json = resultJson(value)
    if (typeof json !== 'string') throw new UnsendableResult('the tool returned content blocks that have no JSON form')
    return [FLAG_BLOCKS, json]
  }
  if (typeof value === 'function' || typeof value === 'symbol') {
    // Not a result (a function returned rather than called, most likely): its source text
    // or `Symbol(...)` was sent to the model as a successful result.
    throw new UnsendableResult(`the tool returned a ${typeof value}, not a result (a string, content blocks or a JSON value)`)
  }
  if (typeof value === 'object' && 'content' in value) {
    // An explicit result: { content, isError } (or the wire name is_error).
    const inner = toReply(value.content)
    if (value.isError ?? value.is_error ?? false) inner[0] |= FLAG_ERROR
    return inner
  }
  if (typeof value === 'object' && Object.hasOwn(value, 'type') && isPlainObject(value)) {
    // One content block ({ type: 'image', source }, { type: 'text', text }): sent as a block,
    // as Python's tools do, not as its JSON text.
    const json = resultJson([value])
    if (typeof json !== 'string') throw new UnsendableResult('the tool returned a content block that has no JSON form')
    return [FLAG_BLOCKS, json]
  }
  const json = resultJson(value)
  // An object whose `toJSON()` gives undefined (or a function, a symbol) has no JSON form: it
  // was sent as "[object Object]", a success saying nothing, where the other values JSON
  // cannot carry (a BigInt, a cycle, a throwing toJSON) are error results.
  if (typeof json !== 'string') throw new UnsendableResult('the tool returned a value that has no JSON form (its toJSON() gave undefined, a function or a symbol)')
  return [0, json]
}

/** Whether `value` (an object) is a plain one, as a content block written inline is. */
function isPlainObject(value) {
  const proto = Object.getPrototypeOf(value)
  return (proto === Object.prototype || proto === null) && typeof value.toJSON !== 'function'
}

/**
 * `JSON.stringify(value)` of a tool's result (a lone surrogate's escape reads as U+FFFD in the
 * native layer; a Set is written as an array, see collectionsReplacer); a value JSON cannot
 * carry (a BigInt, a cycle, a Map) throws an error saying it is the result that could not be
 * sent, not a bare TypeError.
 */
function resultJson(value) {
  try {
    return stringify(value)
  } catch (err) {
    throw new UnsendableResult(`the tool's result cannot be sent as JSON: ${causeText(err)}`)
  }
}

/** Why JSON could not write a result: an error's message alone (its type says nothing more). */
function causeText(err) {
  try {
    if (err instanceof Error) return String(err.message)
  } catch {
    // A message that cannot be read or converted: described below.
  }
  return errorMessage(err)
}

/**
 * The text of what a tool threw. Never throws and always returns a string: a tool may throw
 * anything (an object whose `toString` throws, one with no prototype, an Error whose `message`
 * was replaced by a number), and this runs in promise reactions where a throw would end the
 * process, or a non-string would shift the contents of a settlement batch.
 */
function errorMessage(err) {
  try {
    // "TypeName: message", as Python's tools report their exceptions and as `String(err)` gives
    // for an error of another realm: the model reads which kind of failure it was.
    if (err instanceof UnsendableResult) return err.message
    if (err instanceof Error) {
      const name = typeof err.name === 'string' && err.name !== '' ? err.name : 'Error'
      const message = typeof err.message === 'string' ? err.message : String(err.message)
      return message === '' ? name : `${name}: ${message}`
    }
    // A thrown string is the message; anything else is named as what was thrown (a bare
    // "undefined" or "[object Object]" said nothing about where it came from).
    if (typeof err === 'string') return err
    return `the tool threw ${thrownValue(err)}`
  } catch {
    return 'the tool failed with a value that cannot be converted to a string'
  }
}

/** The text of a thrown non-Error, non-string value (may throw: see errorMessage). */
function thrownValue(value) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return String(value)
  const text = String(value)
  if (text !== '[object Object]') return text
  let json
  try {
    json = JSON.stringify(value)
  } catch {
    // A cycle, a BigInt: the plain text will do.
  }
  return typeof json === 'string' ? json : text
}

/**
 * The promise to wait on when a tool returned `value`, or undefined for a plain value. Never
 * throws. A native promise is used as it is; any other thenable is adopted by `Promise.resolve`,
 * which calls its `then` once, later, and turns a throwing `then` or a repeated settlement into
 * one outcome; a value whose `then` cannot even be read (a throwing getter, a hostile Proxy)
 * becomes a rejection.
 */
function pendingOf(value) {
  if (value === null || typeof value !== 'object') return undefined
  try {
    if (value instanceof Promise) return value
    return typeof value.then === 'function' ? Promise.resolve(value) : undefined
  } catch (err) {
    return Promise.reject(err)
  }
}

/** `promise.then(onValue, onError)` with the built-in `then` (an own `then` is not called). */
const promiseThen = (promise, onValue, onError) => Promise.prototype.then.call(promise, onValue, onError)

/**
 * The `ctx.signal.reason` of a call aborted for `reason` (`timeout`, `aborted`, ...); `cause`:
 * why the run was aborted (its AbortSignal's reason), when that is the reason.
 */
function abortReason(reason, cause) {
  return reason === 'timeout'
    ? new TimeoutError('the tool call timed out')
    : new AbortError(`the tool call was aborted (${reason})`, { cause })
}

/** A tool's `ctx`: `signal` is created when first read (most calls never look at it). */
class CallContext {
  #controller = null
  #abortReason = undefined
  #callId
  /** `complete(callId, flags, content)` until the call ends, then undefined. */
  #complete

  constructor(toolUseId, name, callId, complete, index) {
    this.toolUseId = toolUseId
    this.name = name
    /** The call's position in its turn. */
    this.index = index
    this.#callId = callId
    this.#complete = complete
  }

  /**
   * Reports progress (any JSON value): delivered at once as a `progress` event of the turn (or
   * a `tool_progress` event of an agent run). Ignored once the call has ended. Throws an
   * InvalidArgumentError for data JSON cannot carry. A function bound to this call, so that
   * `(input, { progress }) => ...` works; made when read, as most calls never report progress.
   */
  get progress() {
    return (data) => this.#report(data)
  }

  #report(data) {
    // Only JSON crosses: checked here, where the tool can be told (throws InvalidArgumentError),
    // rather than failing the batch the report would travel in.
    const json = progressJson(data)
    if (this.#complete === undefined) return
    this.#complete(this.#callId, FLAG_PROGRESS, JSON.parse(json))
  }

  /** @internal The call ended: later progress reports are dropped. Returns the completion. */
  end() {
    const complete = this.#complete
    this.#complete = undefined
    return complete
  }

  get signal() {
    if (this.#controller === null) {
      this.#controller = new AbortController()
      if (this.#abortReason !== undefined) this.#controller.abort(this.#abortReason)
    }
    return this.#controller.signal
  }

  abort(reason) {
    if (this.#abortReason !== undefined) return
    this.#abortReason = reason
    if (this.#controller !== null) this.#controller.abort(reason)
  }
}

/**
 * The async context of the code that started a run (or submitted calls to a turn), captured
 * once: its tool calls start in it, whatever wake-up (a microtask, a native callback) starts
 * them, so AsyncLocalStorage values (request-scoped loggers, tracing spans, auth) active at
 * `run(...)` or `submit(...)` are visible inside the tools, as they would be in functions
 * called there.
 */
class CallerScope {
  #resource

  constructor() {
    this.#resource = new AsyncResource('ferroloop.ToolCalls')
  }

  /**
   * Calls `fn.call(thisArg, a, b, c, d)` in the captured context, inside a scope of its own: an
   * `AsyncLocalStorage.enterWith` in a tool then changes that scope only, not the captured
   * context the run's later calls start in. (Four arguments at most: `startUse` takes four.)
   */
  run(fn, thisArg, a, b, c, d) {
    return this.#resource.runInAsyncScope(inFreshScope, null, fn, thisArg, a, b, c, d)
  }
}

function inFreshScope(fn, thisArg, a, b, c, d) {
  return new AsyncResource('ferroloop.ToolCalls').runInAsyncScope(fn, thisArg, a, b, c, d)
}

class ToolHost {
  /** name → fn (shared with the hosts `withOwnCalls` makes) */
  tools
  /** callId → the running call's context (its AbortController is created on first use) */
  running = new Map()

  constructor(tools = new Map()) {
    this.tools = tools
  }

  /**
   * A host running the same tools with a table of running calls of its own. Each native
   * executor and each agent numbers its calls from 0, so each needs its own table: sharing
   * one, an abort, a timeout or a settlement of call 3 of one would reach call 3 of another
   * (two agents built from one executor, an agent beside `executor.run()`, a run still going
   * when `tool()` rebuilt the native executor).
   */
  withOwnCalls() {
    return new ToolHost(this.tools)
  }

  register(name, fn) {
    if (typeof fn !== 'function') throw new InvalidArgumentError(`tool ${name}: the implementation must be a function`)
    this.tools.set(name, fn)
  }

  /**
   * Aborts a running call (its ctx.signal fires with a TimeoutError or an AbortError, whose
   * `cause` is `cause` when given).
   */
  abort({ callId, reason }, cause) {
    const ctx = this.running.get(callId)
    if (ctx === undefined) return
    // Forgotten here: nothing aborts a call twice, and its settlement reaches the executor
    // through the ctx's own completion. A tool that never settles (it ignores its signal)
    // would otherwise stay in this table, ctx and all, for the executor's lifetime.
    this.running.delete(callId)
    const pending = pendingPromises.get(ctx)
    if (pending !== undefined) {
      pendingPromises.delete(ctx)
      neverSettled.register(pending, { callId, ctx })
    }
    ctx.abort(abortReason(reason, cause))
  }

  /** Starts call `callId` of a submitted `tool_use` block, at `index` in its turn (see `start`). */
  startUse(callId, use, complete, index) {
    this.start(callId, use.name, use.id, inputOf(use), complete, index)
  }

  /** Starts the call of an agent's invocation (`{ callId, index, name, toolUseId, input }`; see `start`). */
  startInvocation(call, complete) {
    this.start(call.callId, call.name, call.toolUseId, call.input, complete, call.index)
  }

  /**
   * Starts a call; `complete(callId, flags, content)` receives its outcome (and its progress
   * reports). A call never throws: a throwing or rejecting tool becomes an error reply.
   */
  start(callId, name, toolUseId, input, complete, index) {
    const fn = this.tools.get(name)
    if (fn === undefined) {
      complete(callId, FLAG_ERROR, `no such tool: ${name}`)
      return
    }
    const ctx = new CallContext(toolUseId, name, callId, complete, index)
    this.running.set(callId, ctx)
    let value
    try {
      value = fn(input, ctx)
    } catch (err) {
      this.#settle(callId, ctx, FLAG_ERROR, errorMessage(err))
      return
    }
    const pending = pendingOf(value)
    if (pending !== undefined) {
      // Until the call ends or is aborted (see `abort`): the ctx lives that long in `running`.
      pendingPromises.set(ctx, pending)
      // One reaction per call, no wrapper promise (for a native promise).
      promiseThen(
        pending,
        (settled) => this.#reply(callId, ctx, settled),
        (err) => this.#settle(callId, ctx, FLAG_ERROR, errorMessage(err)),
      )
    } else {
      this.#reply(callId, ctx, value)
    }
  }

  #reply(callId, ctx, value) {
    let reply
    try {
      reply = toReply(value)
    } catch (err) {
      reply = [FLAG_ERROR, errorMessage(err)]
    }
    this.#settle(callId, ctx, reply[0], reply[1])
  }

  #settle(callId, ctx, flags, content) {
    const complete = ctx.end()
    this.running.delete(callId)
    pendingPromises.delete(ctx)
    complete(callId, flags, content)
  }
}

/**
 * The promise a running call's tool returned, by the call's ctx, until the call is aborted:
 * then it moves to `neverSettled`.
 */
const pendingPromises = new WeakMap()

/**
 * Answers an aborted call whose tool's promise was garbage-collected unsettled: nothing can
 * settle it any more (whoever could resolve it is gone). The native side keeps a call that
 * outlived its cleanup grace (a tool ignoring its signal) waiting for its answer on a task of
 * its own, for its cleanup; without an answer that task, its slot in the tool queues and its
 * turn's wake function (a root) stayed for the process's life, one set per such call. The
 * answer comes after the abort, so the call's result stays the timeout or cancellation.
 */
const neverSettled = new FinalizationRegistry(({ callId, ctx }) => {
  const complete = ctx.end()
  if (complete !== undefined) complete(callId, FLAG_ERROR, "the tool's promise was garbage-collected without settling")
})

/**
 * Calls `fn(input, ctx)` and reports its outcome once through `settle(flags, content)` (the
 * reply flags above; never throws). One reaction per call, no wrapper promise.
 */
function callTool(fn, input, ctx, settle) {
  let value
  try {
    value = fn(input, ctx)
  } catch (err) {
    settle(FLAG_ERROR, errorMessage(err))
    return
  }
  const pending = pendingOf(value)
  if (pending !== undefined) {
    promiseThen(
      pending,
      (settled) => settleWith(settle, settled),
      (err) => settle(FLAG_ERROR, errorMessage(err)),
    )
  } else {
    settleWith(settle, value)
  }
}

function settleWith(settle, value) {
  let reply
  try {
    reply = toReply(value)
  } catch (err) {
    reply = [FLAG_ERROR, errorMessage(err)]
  }
  settle(reply[0], reply[1])
}

module.exports = { ToolHost, CallerScope, CallContext, inputOf, progressJson, toReply, errorMessage, pendingOf, promiseThen, callTool, abortReason, FLAG_ERROR, FLAG_BLOCKS, FLAG_PROGRESS }
