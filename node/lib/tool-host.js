'use strict'
// The JavaScript half of the tool calls (node/src/js_tools.rs): a turn's poll hands over the
// calls to start and to abort; `start` runs the tool and reports its settled value through
// `complete(callId, reply)`. A call never throws nor rejects: every outcome, including a thrown
// error, becomes a ToolReply the executor turns into a `tool_result` block.

const { AbortError, TimeoutError, InvalidArgumentError } = require('./errors.js')

/** Normalizes what a tool returned into a ToolReply for Rust. */
function toReply(value) {
  if (typeof value === 'string') return { content: value, contentIsJson: false, isError: false }
  if (value === undefined || value === null) return { content: '', contentIsJson: false, isError: false }
  if (Array.isArray(value)) return { content: JSON.stringify(value), contentIsJson: true, isError: false }
  if (typeof value === 'object' && 'content' in value) {
    // An explicit result: { content, isError } (or the wire name is_error).
    const inner = toReply(value.content)
    inner.isError = Boolean(value.isError ?? value.is_error ?? false)
    return inner
  }
  return { content: JSON.stringify(value) ?? String(value), contentIsJson: false, isError: false }
}

function errorReply(err) {
  const message = err instanceof Error ? err.message || err.name : String(err)
  return { content: message, contentIsJson: false, isError: true }
}

function abortReason(reason) {
  return reason === 'timeout'
    ? new TimeoutError('the tool call timed out')
    : new AbortError(`the tool call was aborted (${reason})`)
}

/** A tool's `ctx`: `signal` is created when first read (most calls never look at it). */
class CallContext {
  #controller = null
  #abortReason = undefined
  #report

  constructor(toolUseId, name, report) {
    this.toolUseId = toolUseId
    this.name = name
    this.#report = report
  }

  /**
   * Reports progress (any JSON value): delivered at once as a `progress` event of the turn (or
   * a `tool_progress` event of an agent run). Ignored once the call has ended.
   */
  progress(data) {
    this.#report?.(data)
  }

  /** @internal The call ended: later progress reports are dropped. */
  end() {
    this.#report = undefined
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

class ToolHost {
  /** name → fn */
  tools = new Map()
  /** callId → the running call's context (its AbortController is created on first use) */
  running = new Map()

  register(name, fn) {
    if (typeof fn !== 'function') throw new InvalidArgumentError(`tool ${name}: the implementation must be a function`)
    this.tools.set(name, fn)
  }

  /** Aborts a running call (its ctx.signal fires with a TimeoutError or an AbortError). */
  abort({ callId, reason }) {
    const ctx = this.running.get(callId)
    if (ctx !== undefined) ctx.abort(abortReason(reason))
  }

  /** Starts a call; `complete(callId, reply)` receives its outcome. */
  start(invocation, complete) {
    const report = (data) => {
      // Only JSON crosses; a value JSON cannot carry (BigInt, a cycle) is dropped here rather
      // than failing the batch it would travel in.
      let json
      try {
        json = JSON.stringify(data ?? null)
      } catch {
        return
      }
      complete(invocation.callId, { progress: true, data: JSON.parse(json ?? 'null') })
    }
    const ctx = new CallContext(invocation.toolUseId, invocation.name, report)
    this.running.set(invocation.callId, ctx)
    this.#run(invocation, ctx).then((reply) => {
      ctx.end()
      this.running.delete(invocation.callId)
      complete(invocation.callId, reply)
    })
  }

  async #run({ name, input }, ctx) {
    const fn = this.tools.get(name)
    if (fn === undefined) return errorReply(new Error(`no such tool: ${name}`))
    try {
      return toReply(await fn(input, ctx))
    } catch (err) {
      return errorReply(err)
    }
  }
}

module.exports = { ToolHost, toReply }
