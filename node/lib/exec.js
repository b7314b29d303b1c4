'use strict'
// ToolExecutor: tools are declared here and implemented as JS functions; the native executor
// (ferroloop::exec) decides admission, ordering, timeouts, cancellation and result budgets, and
// calls the functions through the tool bridge (lib/tool-host.js).

const native = require('../index.js')
const { AbortError, InvalidArgumentError, callNative } = require('./errors.js')
const { ToolHost, CallContext, callTool, abortReason, FLAG_ERROR, FLAG_BLOCKS, FLAG_PROGRESS } = require('./tool-host.js')

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

// Submission flags (node/src/exec.rs): the input follows; the concurrency safety was decided
// here; it was decided safe.
const SUBMIT_HAS_INPUT = 1
const SUBMIT_DECIDED = 2
const SUBMIT_SAFE = 4
/** A submission's tool index for a name no tool has. */
const UNKNOWN_TOOL = 0xffffffff

/**
 * Whether `input` is a plain object (what a tool without a schema accepts): such inputs stay
 * here, and Rust validates `{}` in their place with the same outcome.
 */
function isPlainObject(input) {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return false
  const proto = Object.getPrototypeOf(input)
  return (proto === Object.prototype || proto === null) && typeof input.toJSON !== 'function'
}

/**
 * A per-input concurrency predicate's answer for `input`: a throwing predicate makes the call
 * exclusive (the conservative answer). Shared by ToolExecutor turns and Agent runs.
 */
function decideSafety(predicate, input) {
  try {
    return Boolean(predicate(input))
  } catch {
    return false
  }
}

/** A streaming turn: submit tool uses as the model stream seals them, then seal. */
class Turn {
  #native
  #host
  #complete
  #tools
  /** Every submitted tool use, by index in the turn (the calls start from here). */
  #uses = []
  /** Their ids, by index (the results of a finished turn arrive without them). */
  #ids = []
  /** Events not yet taken by an iterator (from #head on). */
  #events = []
  #head = 0
  #results = []
  #done = false
  #waiters = []
  #scheduled = false
  #keepAlive = null
  // Calls the turn hands over by index (`calls` of a poll): started here, answered with
  // `settle` in one batch per microtask.
  /** Their contexts, by index, while they run (for aborts). */
  #contexts = []
  /** By index: the text a call settled with (its result, unless the core replaced it). */
  #texts = []
  /** Settlements not yet sent: `index, flags, length` triples (#count of them), and their contents. */
  #items = new Uint32Array(96)
  #count = 0
  #contents = []

  /** @internal */
  constructor(executor, host) {
    this.#host = host
    this.#complete = executor.complete
    this.#tools = executor.tools
    // The waker's thread-safe function calls this when the turn can progress.
    this.#native = callNative(() => executor.native.startTurn(() => this.#pump()))
  }

  /** Polls on a microtask (several requests in one tick coalesce into one poll). */
  #schedule() {
    if (this.#scheduled) return
    this.#scheduled = true
    queueMicrotask(() => {
      this.#scheduled = false
      this.#pump()
    })
  }

  /** Queues a settlement (or, flag 4, a progress report) of a call started by index. */
  #settle = (index, flags, content) => {
    if ((flags & FLAG_PROGRESS) !== 0) {
      content = JSON.stringify(content)
    } else {
      this.#contexts[index] = undefined
      if ((flags & FLAG_BLOCKS) === 0) this.#texts[index] = content
    }
    const n = this.#count++
    if (n === 0) queueMicrotask(this.#flush)
    let items = this.#items
    if (3 * n + 3 > items.length) {
      items = new Uint32Array(2 * items.length)
      items.set(this.#items)
      this.#items = items
    }
    items[3 * n] = index
    items[3 * n + 1] = flags
    items[3 * n + 2] = content.length
    this.#contents[n] = content
  }

  /** Sends the settlements of this microtask in one call, then polls. */
  #flush = () => {
    const items = this.#items.subarray(0, 3 * this.#count)
    const contents = this.#contents.join('')
    this.#count = 0
    this.#contents = []
    if (this.#done) return
    callNative(() => this.#native.settle(items, contents))
    this.#pump()
  }

  #startByIndex(index) {
    const use = this.#uses[index]
    this.#uses[index] = undefined
    const fn = this.#host.tools.get(use.name)
    const settle = this.#settle
    if (fn === undefined) {
      settle(index, FLAG_ERROR, `no such tool: ${use.name}`)
      return
    }
    const ctx = new CallContext(use.id, use.name, index, settle)
    this.#contexts[index] = ctx
    callTool(fn, use.input, ctx, (flags, content) => {
      ctx.end()
      settle(index, flags, content)
    })
  }

  #pump() {
    if (this.#done) return
    const out = JSON.parse(callNative(() => this.#native.pollJson()))
    for (const abort of out.aborts) this.#host.abort(abort)
    for (const index of out.cancels) this.#contexts[index]?.abort(abortReason('aborted'))
    const starts = out.starts
    const uses = this.#uses
    const host = this.#host
    const complete = this.#complete
    for (let k = 0; k < starts.length; k += 2) {
      const index = starts[k + 1]
      const use = uses[index]
      uses[index] = undefined
      host.start(starts[k], use.name, use.id, use.input, complete)
    }
    if (out.calls > 0) {
      const calls = callNative(() => this.#native.takeCalls())
      for (let k = 0; k < calls.length; k++) this.#startByIndex(calls[k])
    }
    for (const event of out.events) {
      this.#events.push(event)
      if (event.type === 'result') this.#results.push(event.result)
    }
    if (out.results !== undefined) {
      // Flags per result (1 = error, 2 = the content is the text the call settled with, kept
      // here); the other contents come in order.
      const flags = callNative(() => this.#native.takeResultFlags())
      const changed = out.results
      const ids = this.#ids
      const texts = this.#texts
      const results = new Array(flags.length)
      for (let i = 0, k = 0; i < flags.length; i++) {
        const content = (flags[i] & 2) !== 0 ? texts[i] : changed[k++]
        results[i] = { type: 'tool_result', tool_use_id: ids[i], content, is_error: (flags[i] & 1) !== 0 }
      }
      this.#results = results
      this.#texts = []
    }
    if (out.done) {
      this.#done = true
      this.#release()
    }
    if (out.events.length > 0 || out.done) {
      const waiters = this.#waiters
      this.#waiters = []
      for (const resolve of waiters) resolve()
    }
  }

  // While someone awaits the turn, a ref'd timer keeps the event loop alive (the turn may be
  // waiting only on an async-runtime timer, e.g. a timeout); released when the turn is done.
  #wait() {
    if (this.#keepAlive === null) this.#keepAlive = setInterval(() => {}, 2 ** 30)
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  #release() {
    if (this.#keepAlive !== null) {
      clearInterval(this.#keepAlive)
      this.#keepAlive = null
    }
  }

  /** Submits `tool_use` blocks ({ id, name, input }); they start as soon as admission allows. */
  submit(...toolUses) {
    for (const use of toolUses) {
      if (!isObject(use) || typeof use.id !== 'string' || typeof use.name !== 'string') {
        throw new InvalidArgumentError('a tool use needs string `id` and `name` (and an `input`)')
      }
    }
    // `tool, flags, idLength` per call, the ids one after the other, and (as JSON) only what
    // the native side cannot know: unknown tools' names and the inputs it must validate.
    const items = new Uint32Array(3 * toolUses.length)
    const ids = new Array(toolUses.length)
    const extra = []
    for (let k = 0; k < toolUses.length; k++) {
      const use = toolUses[k]
      const tool = this.#tools.get(use.name)
      let flags = 0
      if (tool?.safety !== undefined) {
        // Decided now, on the input as submitted.
        flags |= SUBMIT_DECIDED | (decideSafety(tool.safety, use.input) ? SUBMIT_SAFE : 0)
      }
      if (tool === undefined) extra.push(use.name)
      if (tool === undefined || tool.hasSchema || !isPlainObject(use.input)) {
        flags |= SUBMIT_HAS_INPUT
        extra.push(use.input === undefined ? null : use.input)
      }
      items[3 * k] = tool === undefined ? UNKNOWN_TOOL : tool.index
      items[3 * k + 1] = flags
      items[3 * k + 2] = use.id.length
      ids[k] = use.id
    }
    callNative(() => this.#native.submit(items, ids.join(''), extra.length === 0 ? '' : JSON.stringify(extra)))
    for (const use of toolUses) {
      this.#uses.push(use)
      this.#ids.push(use.id)
    }
    this.#schedule()
  }

  /** No more tool uses: the turn ends once every submitted call is answered. */
  seal() {
    callNative(() => this.#native.seal())
    this.#schedule()
  }

  /** @internal Seals the turn and drops its events: the results arrive all at once. */
  _finish() {
    callNative(() => this.#native.finish())
    this.#schedule()
  }

  /** Cancels running and queued calls; each still gets its is_error result. */
  cancel() {
    callNative(() => this.#native.cancel())
    this.#schedule()
  }

  /** Cancels and seals (the model response will be replayed). */
  discard() {
    callNative(() => this.#native.discard())
    this.#schedule()
  }

  /** Every result, in submission order (wire-shaped `tool_result` blocks). Needs seal(). */
  async results() {
    this.#schedule()
    while (!this.#done) await this.#wait()
    return this.#results
  }

  /** Events as they happen (started, progress, finished, detached) and results in order. */
  async *[Symbol.asyncIterator]() {
    this.#schedule()
    try {
      for (;;) {
        if (this.#head < this.#events.length) {
          const event = this.#events[this.#head]
          this.#events[this.#head++] = undefined
          yield event
          continue
        }
        if (this.#done) return
        await this.#wait()
      }
    } finally {
      if (this.#waiters.length === 0) this.#release()
    }
  }
}

/**
 * A native executor's reply batcher: replies (and progress reports) settled in one tick go back
 * to Rust in one `completeJson` call, as one flat `[callId, flags, content, ...]` array (one
 * boundary crossing and one wake for a burst of quick tools).
 */
function replyBatcher(target) {
  let pending = []
  const flush = () => {
    const replies = pending
    pending = []
    callNative(() => target.completeJson(JSON.stringify(replies)))
  }
  // Replies and progress reports share the batch, so their order is kept.
  return (callId, flags, content) => {
    if (pending.length === 0) queueMicrotask(flush)
    pending.push(callId, flags, content)
  }
}

function nativeExecutorWithBatching(nativeExecutor, tools) {
  return { native: nativeExecutor, complete: replyBatcher(nativeExecutor), tools }
}

class ToolExecutor {
  #options
  #specs = new Map()
  /** name → { safety?: (input) => boolean, hasSchema } (what a turn needs at submission) */
  #tools = new Map()
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
    callNative(() => new native.ToolExecutor(this.#options, []))
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
    if (spec.schema !== undefined && !isObject(spec.schema)) {
      throw new InvalidArgumentError(`tool ${spec.name}: schema must be a JSON Schema object`)
    }
    const safety = typeof spec.concurrencySafe === 'function' ? spec.concurrencySafe : undefined
    const nativeSpec = {
      name: spec.name,
      concurrencySafe: safety === undefined ? optionalBoolean(spec.concurrencySafe, 'concurrencySafe') : undefined,
      safetyPerInput: safety !== undefined,
      timeoutMs: optionalNumber(spec.timeoutMs, 'timeoutMs'),
      maxResultChars: optionalNumber(spec.maxResultChars, 'maxResultChars'),
      schemaJson: spec.schema === undefined ? undefined : JSON.stringify(spec.schema),
      cancelsSiblingsOnError: optionalBoolean(spec.cancelsSiblingsOnError, 'cancelsSiblingsOnError'),
    }
    // Build once to validate the declaration (schema, limits) at registration time.
    callNative(() => new native.ToolExecutor(this.#options, [nativeSpec]))
    this.#specs.set(spec.name, nativeSpec)
    // `index`: the tool's position in the declarations the native executor is built from.
    this.#tools.set(spec.name, { safety, hasSchema: spec.schema !== undefined, index: this.#specs.size - 1 })
    this.#host.register(spec.name, fn)
    this.#native = null
    return this
  }

  #executor() {
    if (this.#native === null) {
      this.#native = nativeExecutorWithBatching(
        callNative(() => new native.ToolExecutor(this.#options, [...this.#specs.values()])),
        this.#tools,
      )
    }
    return this.#native
  }

  /** @internal What an Agent needs to run these tools inside its own loop. */
  _internals() {
    return { options: this.#options, specs: [...this.#specs.values()], host: this.#host, tools: this.#tools }
  }

  /** Starts a streaming turn. */
  turn() {
    return new Turn(this.#executor(), this.#host)
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
    const turn = new Turn(this.#executor(), this.#host)
    turn.submit(...toolUses)
    turn._finish()
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

/** @internal */
function executorInternals(executor) {
  return executor._internals()
}

module.exports = { ToolExecutor, Turn, executorInternals, replyBatcher, decideSafety }
