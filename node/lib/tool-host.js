'use strict'
// The JavaScript half of the tool bridge (node/src/tool_bridge.rs): Rust invokes tools through
// `invoke` and aborts running calls through `abort`. `invoke` never throws and never rejects:
// every outcome, including a thrown error, becomes a ToolReply the executor turns into a
// `tool_result` block.

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

class ToolHost {
  /** name → { spec, fn } */
  tools = new Map()
  /** callId → AbortController of a running call */
  running = new Map()

  constructor() {
    this.invoke = (invocation) => this.#invoke(invocation)
    this.abort = ({ callId, reason }) => {
      const controller = this.running.get(callId)
      if (controller !== undefined && !controller.signal.aborted) controller.abort(abortReason(reason))
    }
  }

  register(name, fn) {
    if (typeof fn !== 'function') throw new InvalidArgumentError(`tool ${name}: the implementation must be a function`)
    this.tools.set(name, fn)
  }

  async #invoke({ callId, name, toolUseId, inputJson }) {
    const fn = this.tools.get(name)
    if (fn === undefined) return errorReply(new Error(`no such tool: ${name}`))
    const controller = new AbortController()
    this.running.set(callId, controller)
    try {
      const input = JSON.parse(inputJson)
      return toReply(await fn(input, { signal: controller.signal, toolUseId, name }))
    } catch (err) {
      return errorReply(err)
    } finally {
      this.running.delete(callId)
    }
  }
}

module.exports = { ToolHost, toReply }
