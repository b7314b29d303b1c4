'use strict'
// ToolExecutor: tools are declared here and implemented as JS functions; the native executor
// (ferroloop::exec) decides admission, ordering, timeouts, cancellation and result budgets, and
// calls the functions through the tool bridge (lib/tool-host.js).

const native = require('../index.js')
const { AbortError, InvalidArgumentError, callNative, toFerroloopError } = require('./errors.js')
const { ToolHost } = require('./tool-host.js')

const isObject = (v) => v !== null && typeof v === 'object'

function optionalNumber(value, what) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || Number.isNaN(value)) throw new InvalidArgumentError(`${what} must be a number`)
  return value
}

function optionalBoolean(value, what) {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'boolean') throw new InvalidArgumentError(`${what} must be a boolean`)
  return value
}

async function awaitNative(promise) {
  try {
    return await promise
  } catch (err) {
    throw toFerroloopError(err)
  }
}

/** A streaming turn: submit tool uses as the model stream seals them, then seal. */
class Turn {
  #native

  /** @internal */
  constructor(nativeTurn) {
    this.#native = nativeTurn
  }

  /** Submits `tool_use` blocks ({ id, name, input }); they start as soon as admission allows. */
  submit(...toolUses) {
    for (const use of toolUses) {
      if (!isObject(use) || typeof use.id !== 'string' || typeof use.name !== 'string') {
        throw new InvalidArgumentError('a tool use needs string `id` and `name` (and an `input`)')
      }
    }
    callNative(() => this.#native.submitJson(JSON.stringify(toolUses)))
  }

  /** No more tool uses: the turn ends once every submitted call is answered. */
  seal() {
    callNative(() => this.#native.seal())
  }

  /** Cancels running and queued calls; each still gets its is_error result. */
  cancel() {
    callNative(() => this.#native.cancel())
  }

  /** Cancels and seals (the model response will be replayed). */
  discard() {
    callNative(() => this.#native.discard())
  }

  /** Every result, in submission order (wire-shaped `tool_result` blocks). Needs seal(). */
  async results() {
    return JSON.parse(await awaitNative(this.#native.finishJson()))
  }

  /** Events as they happen (started, progress, finished, detached) and results in order. */
  async *[Symbol.asyncIterator]() {
    for (;;) {
      const event = await awaitNative(this.#native.nextEventJson())
      if (event === null) return
      yield JSON.parse(event)
    }
  }
}

class ToolExecutor {
  #options
  #specs = new Map()
  #host = new ToolHost()
  #native = null

  /** @param {import('./index').ToolExecutorOptions} [options] */
  constructor(options = {}) {
    if (!isObject(options)) throw new InvalidArgumentError('ToolExecutor options must be an object')
    this.#options = {
      maxConcurrency: optionalNumber(options.maxConcurrency, 'maxConcurrency'),
      defaultTimeoutMs: optionalNumber(options.defaultTimeoutMs, 'defaultTimeoutMs'),
      cleanupGraceMs: optionalNumber(options.cleanupGraceMs, 'cleanupGraceMs'),
      defaultMaxResultChars: optionalNumber(options.defaultMaxResultChars, 'defaultMaxResultChars'),
      turnBudgetChars: optionalNumber(options.turnBudgetChars, 'turnBudgetChars'),
      spillDir: options.spillDir === undefined ? undefined : String(options.spillDir),
    }
    // Validate now rather than at the first run.
    callNative(() => new native.ToolExecutor(this.#options, [], this.#host.invoke, this.#host.abort))
  }

  /**
   * Registers a tool. `fn(input, ctx)` may return a string, an array of content blocks, or
   * `{ content, isError }`, synchronously or as a Promise; throwing or rejecting produces an
   * is_error result. `ctx.signal` aborts on timeout or cancellation.
   */
  tool(spec, fn) {
    if (!isObject(spec) || typeof spec.name !== 'string' || spec.name === '') {
      throw new InvalidArgumentError('tool(spec, fn): spec.name must be a non-empty string')
    }
    if (typeof fn !== 'function') throw new InvalidArgumentError(`tool ${spec.name}: fn must be a function`)
    if (this.#specs.has(spec.name)) throw new InvalidArgumentError(`a tool named '${spec.name}' is already registered`)
    if (typeof spec.concurrencySafe === 'function') {
      throw new InvalidArgumentError(`tool ${spec.name}: concurrencySafe must be a boolean (per-input decisions are not supported yet)`)
    }
    if (spec.schema !== undefined && !isObject(spec.schema)) {
      throw new InvalidArgumentError(`tool ${spec.name}: schema must be a JSON Schema object`)
    }
    const nativeSpec = {
      name: spec.name,
      concurrencySafe: optionalBoolean(spec.concurrencySafe, 'concurrencySafe'),
      timeoutMs: optionalNumber(spec.timeoutMs, 'timeoutMs'),
      maxResultChars: optionalNumber(spec.maxResultChars, 'maxResultChars'),
      schemaJson: spec.schema === undefined ? undefined : JSON.stringify(spec.schema),
      cancelsSiblingsOnError: optionalBoolean(spec.cancelsSiblingsOnError, 'cancelsSiblingsOnError'),
    }
    // Build once to validate the declaration (schema, limits) at registration time.
    callNative(() => new native.ToolExecutor(this.#options, [nativeSpec], this.#host.invoke, this.#host.abort))
    this.#specs.set(spec.name, nativeSpec)
    this.#host.register(spec.name, fn)
    this.#native = null
    return this
  }

  #executor() {
    if (this.#native === null) {
      this.#native = callNative(
        () => new native.ToolExecutor(this.#options, [...this.#specs.values()], this.#host.invoke, this.#host.abort),
      )
    }
    return this.#native
  }

  /** Starts a streaming turn. */
  turn() {
    return new Turn(callNative(() => this.#executor().startTurn()))
  }

  /**
   * Runs a batch of `tool_use` blocks; resolves with one `tool_result` per use, in request
   * order. Aborting `signal` aborts running tools (through `ctx.signal`) and rejects with an
   * AbortError.
   */
  async run(toolUses, { signal } = {}) {
    if (!Array.isArray(toolUses)) throw new InvalidArgumentError('run(toolUses): toolUses must be an array')
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidArgumentError('run: signal must be an AbortSignal')
    }
    if (signal?.aborted) throw new AbortError('the run was aborted before it started', { cause: signal.reason })
    const turn = this.turn()
    turn.submit(...toolUses)
    turn.seal()
    const onAbort = () => turn.cancel()
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const results = await turn.results()
      if (signal?.aborted) throw new AbortError('the run was aborted', { cause: signal.reason })
      return results
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
  }
}

module.exports = { ToolExecutor, Turn }
