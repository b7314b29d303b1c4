'use strict'
// ToolExecutor: tools are declared here and implemented as JS functions; the native executor
// (ferroloop::exec) decides admission, ordering, timeouts, cancellation and result budgets, and
// calls the functions through the tool bridge (lib/tool-host.js).

const native = require('../index.js')
const { AbortError, InvalidArgumentError, InvalidStateError, callNative, toJson, jsonFailure, stringify, checkedOptions, wellFormed, optionalNumber, optionalBoolean, optionalPath } = require('./errors.js')
const { onAbort, checkSignal } = require('./abort.js')
const { closableIterator } = require('./iterate.js')
const { ToolHost, CallerScope, inputOf, progressJson, toReply, errorMessage, pendingOf, promiseThen, abortReason, FLAG_ERROR, FLAG_BLOCKS, FLAG_PROGRESS } = require('./tool-host.js')

const isObject = (v) => v !== null && typeof v === 'object'

const EXECUTOR_OPTIONS = ['maxConcurrency', 'defaultTimeoutMs', 'cleanupGraceMs', 'defaultMaxResultChars', 'turnBudgetChars', 'spillDir']
const TOOL_OPTIONS = ['name', 'description', 'concurrencySafe', 'timeoutMs', 'maxResultChars', 'schema', 'cancelsSiblingsOnError']
/** The options of `run()` and `turn()`. */
const SIGNAL_OPTIONS = ['signal']



// Submission flags (node/src/exec.rs): the input follows; the concurrency safety was decided
// here; it was decided safe.
const SUBMIT_HAS_INPUT = 1
const SUBMIT_DECIDED = 2
const SUBMIT_SAFE = 4
/** Submission flag: the input could not be handed over; its reason follows instead (the core answers the call). */
const SUBMIT_REFUSED = 8
/**
 * Settlement flag (node/src/exec.rs): a plain text kept here and not sent (a finishing turn
 * holds a placeholder, and asks for the text only if its result budget needs it).
 */
const SETTLE_HELD = 8
/** A submission's tool index for a name no tool has. */
const UNKNOWN_TOOL = 0xffffffff

/**
 * Whether `input` is a plain object (what a tool without a schema accepts): such inputs stay
 * here, and Rust validates `{}` in their place with the same outcome.
 */
function isPlainObject(input) {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return false
  if (typeof input.toJSON === 'function') return false
  // The common case without Object.getPrototypeOf (a runtime call in V8, even from optimized
  // code): the inherited `__proto__` accessor. (An own `__proto__` property, as JSON.parse
  // makes, is a value, not the prototype: such objects take the exact path.)
  if (input.__proto__ === Object.prototype) return true
  const proto = Object.getPrototypeOf(input)
  return proto === Object.prototype || proto === null
}

/** Thrown by a turn's `#encode`: some input of the batch cannot be sent as JSON. */
class UnsendableInput extends Error {}

/** Why `input` cannot be sent as JSON (undefined when it can). Never throws. */
function unsendableReason(input) {
  try {
    // A Set crosses as an array (as Python sends a set), a Map is refused: JSON.stringify wrote
    // both `{}`, and a schema refused the input, or validated an empty object.
    stringify(input)
    return undefined
  } catch (err) {
    return jsonFailure(err)
  }
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

/**
 * A running call's `ctx` in a turn: three fields; `toolUseId` and `name` are read from the
 * submitted `tool_use`, the `signal` is created when first read (most calls never look at it).
 */
class TurnCallContext {
  #calls
  #index
  #use

  constructor(calls, index, use) {
    this.#calls = calls
    this.#index = index
    this.#use = use
  }

  /** The id of the `tool_use` block being answered. */
  get toolUseId() {
    return this.#use.id
  }

  /** The tool's name. */
  get name() {
    return this.#use.name
  }

  /** The call's position in its turn. */
  get index() {
    return this.#index
  }

  get signal() {
    return this.#calls.signal(this.#index)
  }

  /**
   * Reports progress (any JSON value): delivered at once as a `progress` event of the turn.
   * Ignored once the call has ended. Throws an InvalidArgumentError for data JSON cannot carry.
   * A function bound to this call, so that `(input, { progress }) => ...` works as the other
   * members do (they are getters); made when read, as most calls never report progress.
   */
  get progress() {
    const calls = this.#calls
    const index = this.#index
    return (data) => calls.progress(index, data)
  }
}

/**
 * The calls of one turn, by index: their `tool_use` blocks, which ones ended, and the abort
 * state of the few whose `ctx.signal` was read or that were aborted.
 */
class TurnCalls {
  /** Every submitted tool use, by index in the turn (kept: the results carry their ids). */
  uses = []
  /** By index: the CallerScope of the `submit` (or `run`) that submitted the call. */
  scopes = []
  /** By index: 1 once the call has ended (its later progress reports are dropped). */
  ended = new Uint8Array(64)
  /** index → AbortController, for the calls whose `ctx.signal` was read. */
  controllers = new Map()
  /** index → abort reason, for the calls aborted before their `ctx.signal` was read. */
  reasons = new Map()
  /** Why every running call is aborted: its turn was collected unfinished (see `abandon`). */
  #abandoned = undefined
  /**
   * `settle(index, flags, content)` of the turn, which reaches the turn weakly: a tool keeps
   * its ctx, and with it these calls, but must not keep the turn (see `Turn.#abandon`).
   */
  #settle

  constructor(settle) {
    this.#settle = settle
  }

  /** Makes room for the calls up to `count`. */
  reserve(count) {
    if (count <= this.ended.length) return
    let size = this.ended.length
    while (size < count) size *= 2
    const ended = new Uint8Array(size)
    ended.set(this.ended)
    this.ended = ended
  }

  signal(index) {
    let controller = this.controllers.get(index)
    if (controller === undefined) {
      controller = new AbortController()
      const reason = this.reasons.get(index) ?? (this.ended[index] === 0 ? this.#abandoned : undefined)
      if (reason !== undefined) controller.abort(reason)
      // An ended call's signal is not kept (nothing will abort it any more).
      if (this.ended[index] === 0) this.controllers.set(index, controller)
    }
    return controller.signal
  }

  progress(index, data) {
    // Only JSON crosses: checked here, where the tool can be told (throws InvalidArgumentError),
    // rather than failing the batch the report would travel in.
    const json = progressJson(data)
    if (this.ended[index] !== 0) return
    this.#settle(index, FLAG_PROGRESS, json)
  }

  /** Aborts running call `index` (its ctx.signal fires with `reason`). */
  abort(index, reason) {
    if (this.ended[index] !== 0 || this.reasons.has(index)) return
    this.reasons.set(index, reason)
    this.controllers.get(index)?.abort(reason)
  }

  /**
   * The turn was garbage-collected unfinished: its running calls are aborted (their
   * `ctx.signal`, read now or later, fires with an AbortError whose `cause` says why). Their
   * settlements go nowhere; nothing else of theirs is left to release.
   */
  abandon() {
    const reason = abortReason('aborted', new AbortError('the turn was garbage-collected unfinished: nothing referred to it any more'))
    this.#abandoned = reason
    // (A call aborted before has its reason already: a second abort does nothing.)
    for (const [index, controller] of this.controllers) {
      if (this.ended[index] === 0) controller.abort(reason)
    }
    this.controllers.clear()
  }

  /** Call `index` ended. */
  end(index) {
    this.ended[index] = 1
    if (this.controllers.size !== 0) this.controllers.delete(index)
    if (this.reasons.size !== 0) this.reasons.delete(index)
  }
}

/** A streaming turn: submit tool uses as the model stream seals them, then seal. */
class Turn {
  #native
  #host
  #complete
  #tools
  /** The submitted calls (their `tool_use` blocks, by index) and their abort state. */
  #calls
  /** Events not yet taken by an iterator (from #head on). */
  #events = []
  #head = 0
  /**
   * The iterator whose `next()` is pending, if any: another iterator's `next()` meanwhile is
   * refused, as Python's Turn refuses a second `__anext__` while one waits (the two would
   * share the cursor, each getting only some events). Only a pending `next()` counts: an
   * iterator abandoned between two (never `return()`ed, which an iterator need not be)
   * would otherwise keep every later loop from the turn until it ended.
   */
  #reader = null
  /**
   * Iterators that have read (a `next()` accepted) and not ended, abandoned ones included:
   * while there are any, an iterator closed unread was never the turn's follower and cancels
   * nothing.
   */
  #followers = 0
  #results = []
  #done = false
  #waiters = []
  #scheduled = false
  #keepAlive = null
  /** The last poll found the turn waiting on JavaScript alone (see #wait). */
  #idle = false
  // Calls the turn hands over by index (`calls` of a poll): started here, answered with
  // `settle` in one batch per microtask.
  /** By index: the text a call settled with (its result, unless the core replaced it). */
  #texts = []
  /** Settlements not yet sent: `index, flags, length` triples (#count of them), and their contents. */
  #items = new Uint32Array(96)
  #count = 0
  #contents = []
  /** The last tool looked up by name (a turn often calls one tool many times). */
  #lastName = undefined
  #lastFn = undefined
  #lastToolName = undefined
  #lastTool = undefined
  /** `_finish()` was called: plain texts stay here (see SETTLE_HELD). */
  #finishing = false
  /** Why `_cancel(reason)` cancelled the turn (the cause of the calls' abort reasons). */
  #cancelCause = undefined
  /** Stops listening to the AbortSignal given to `turn()` (called once the turn is done). */
  #stopListening = undefined
  /** A WeakRef to this turn: what its calls' settlements and its wake function reach it by. */
  #self

  /**
   * Aborts the running calls of a turn collected unfinished (a turn dropped unsealed, its
   * model stream having failed): the README's "garbage-collected, which cancels its work". Its
   * held value is the turn's calls, which reach the turn only weakly.
   */
  static #abandon = new FinalizationRegistry((calls) => calls.abandon())

  /** @internal */
  constructor(executor) {
    this.#host = executor.host
    this.#complete = executor.complete
    this.#tools = executor.tools
    // Nothing a running call holds reaches the turn strongly (its ctx, the reactions on its
    // tool's promise): the turn is collected once nobody refers to it or waits for it, and its
    // collection aborts the calls. A call of a tool with a timeout is the exception: it holds
    // the turn until it ends, or its timeout aborts it (see #hostComplete).
    const self = new WeakRef(this)
    this.#self = self
    this.#calls = new TurnCalls(Turn.#settlerOf(self))
    Turn.#abandon.register(this, this.#calls, this)
    // The waker's thread-safe function calls this when the turn can progress. It holds its
    // function as a root until the turn is done, so the function reaches the turn weakly: a
    // turn dropped unsealed (its model stream failed) would never be done, and never
    // collected. A turn someone waits for is kept alive by the wait (see #wait).
    const wake = Turn.#wakerOf(self)
    this.#native = callNative(() => executor.native.startTurn(wake))
  }

  /** The wake function of the turn `self` refers to (a closure over `self` alone). */
  static #wakerOf(self) {
    return () => self.deref()?.#pump()
  }

  /** The `settle` of the turn `self` refers to, for its calls' progress reports. */
  static #settlerOf(self) {
    return (index, flags, content) => self.deref()?.#settle(index, flags, content)
  }

  /** Settles call `index` of the turn `this` (a WeakRef) refers to with its tool's value. */
  static #settleValueOf(index, value) {
    this.deref()?.#settleValue(index, value)
  }

  /** Settles call `index` of the turn `this` (a WeakRef) refers to with its tool's error. */
  static #rejectOf(index, err) {
    this.deref()?.#reject(index, err)
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

  /**
   * Queues a settlement (or, flag 4, a progress report, its data as JSON text) of a call
   * started by index.
   */
  #settle = (index, flags, content) => {
    if ((flags & FLAG_PROGRESS) === 0) {
      this.#calls.end(index)
      if ((flags & FLAG_BLOCKS) === 0) {
        this.#texts[index] = content
        if (this.#finishing) flags |= SETTLE_HELD
      }
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
    if ((flags & SETTLE_HELD) === 0) this.#contents.push(content)
  }

  /**
   * The completion of the calls this turn starts through the tool host (calls with a
   * timeout): the executor's, through this turn, so that a running call keeps its turn alive,
   * and with it the timeout that aborts the call (with a TimeoutError, as a timeout should:
   * collecting the turn earlier would abort it as cancelled instead).
   */
  #hostComplete = (callId, flags, content) => this.#complete(callId, flags, content)

  /** Settles call `index` with what its tool returned. */
  #settleValue(index, value) {
    if (typeof value === 'string') {
      this.#settle(index, 0, value)
      return
    }
    let reply
    try {
      reply = toReply(value)
    } catch (err) {
      reply = [FLAG_ERROR, errorMessage(err)]
    }
    this.#settle(index, reply[0], reply[1])
  }

  /** Settles call `index` with the error its tool threw or rejected with. */
  #reject(index, err) {
    this.#settle(index, FLAG_ERROR, errorMessage(err))
  }

  /** Sends the settlements of this microtask in one call, then polls. */
  #flush = () => {
    const items = this.#items.subarray(0, 3 * this.#count)
    const contents = this.#contents.join('')
    this.#count = 0
    this.#contents = []
    if (this.#done) return
    if (callNative(() => this.#native.settle(items, contents)) > 0) this.#settleNeededTexts()
    this.#pump()
  }

  /** Settles again, with their text, the kept texts the turn needs after all. */
  #settleNeededTexts() {
    const needed = callNative(() => this.#native.takeNeededTexts())
    const n = needed.length >> 1
    const items = new Uint32Array(3 * n)
    const texts = new Array(n)
    for (let k = 0; k < n; k++) {
      const text = this.#texts[needed[2 * k]]
      items[3 * k] = needed[2 * k]
      items[3 * k + 1] = needed[2 * k + 1]
      items[3 * k + 2] = text.length
      texts[k] = text
    }
    callNative(() => this.#native.settle(items, texts.join('')))
  }

  /** Gives the kept texts a finishing turn asks for (its result budget may need them). */
  #provideTexts() {
    const requests = callNative(() => this.#native.takeTextRequests())
    const items = new Uint32Array(2 * requests.length)
    const texts = new Array(requests.length)
    for (let k = 0; k < requests.length; k++) {
      const text = this.#texts[requests[k]]
      items[2 * k] = requests[k]
      items[2 * k + 1] = text.length
      texts[k] = text
    }
    callNative(() => this.#native.provideTexts(items, texts.join('')))
    this.#schedule()
  }

  /** The tool function named `name` (undefined for an unknown tool). */
  #toolFunction(name) {
    if (name !== this.#lastName) {
      this.#lastFn = this.#host.tools.get(name)
      this.#lastName = this.#lastFn === undefined ? undefined : name
    }
    return this.#lastFn
  }

  /** Starts the calls `calls[from..to]`, by index. */
  #startRange(calls, from, to) {
    for (let k = from; k < to; k++) this.#startByIndex(calls[k])
  }

  /** Starts call `index` (one reaction on the tool's promise, no wrapper promise). */
  #startByIndex(index) {
    const use = this.#calls.uses[index]
    const fn = this.#toolFunction(use.name)
    if (fn === undefined) {
      this.#settle(index, FLAG_ERROR, `no such tool: ${use.name}`)
      return
    }
    let value
    try {
      value = fn(inputOf(use), new TurnCallContext(this.#calls, index, use))
    } catch (err) {
      this.#settle(index, FLAG_ERROR, errorMessage(err))
      return
    }
    const pending = pendingOf(value)
    if (pending !== undefined) {
      // Bound methods rather than arrow functions: a fresh closure runs V8's lazy-compile
      // trampoline on its first call, once per call here. Bound to the turn's WeakRef: a
      // tool's pending promise must not keep its turn alive (see the constructor).
      const self = this.#self
      promiseThen(pending, Turn.#settleValueOf.bind(self, index), Turn.#rejectOf.bind(self, index))
    } else {
      this.#settleValue(index, value)
    }
  }

  #pump() {
    if (this.#done) return
    const out = JSON.parse(callNative(() => this.#native.pollJson()))
    for (const index of out.cancels) this.#calls.abort(index, abortReason('aborted', this.#cancelCause))
    const starts = out.starts
    const uses = this.#calls.uses
    const host = this.#host
    const complete = this.#hostComplete
    // Each call starts in the async context of the submit that submitted it (its CallerScope),
    // entered once per run of consecutive calls sharing one.
    const scopes = this.#calls.scopes
    for (let k = 0; k < starts.length; k += 2) {
      const use = uses[starts[k + 1]]
      scopes[starts[k + 1]].run(host.startUse, host, starts[k], use, complete, starts[k + 1])
    }
    // After the starts: a call cancelled after it was queued has its start and its abort in
    // one poll, and the host ignores an abort for a call it has not started.
    for (const abort of out.aborts) host.abort(abort, this.#cancelCause)
    if (out.calls > 0) {
      const calls = callNative(() => this.#native.takeCalls())
      for (let k = 0; k < calls.length; ) {
        const scope = scopes[calls[k]]
        let end = k + 1
        while (end < calls.length && scopes[calls[end]] === scope) end++
        scope.run(this.#startRange, this, calls, k, end)
        k = end
      }
    }
    if (out.texts > 0) this.#provideTexts()
    for (const event of out.events) {
      // The ids as submitted: Rust strings cannot hold a lone surrogate, so an id with one came
      // back with U+FFFD and no longer matched its tool use (run() already used the JS ids).
      const submitted = this.#calls.uses[event.index]?.id
      if (submitted !== undefined) {
        if (event.type === 'result') event.result.tool_use_id = submitted
        else if (event.toolUseId !== undefined) event.toolUseId = submitted
      }
      this.#events.push(event)
      if (event.type === 'result') this.#results.push(event.result)
    }
    if (out.results !== undefined) {
      // Flags per result (1 = error, 2 = the content is the text the call settled with, kept
      // here); the other contents come in order.
      const flags = callNative(() => this.#native.takeResultFlags())
      const changed = out.results
      const uses = this.#calls.uses
      const texts = this.#texts
      const results = new Array(flags.length)
      for (let i = 0, k = 0; i < flags.length; i++) {
        // A kept text as the native side read it (a lone surrogate is U+FFFD there, as in the
        // contents it sends and in a streaming turn's results).
        const content = (flags[i] & 2) !== 0 ? wellFormed(texts[i]) : changed[k++]
        results[i] = { type: 'tool_result', tool_use_id: uses[i].id, content, is_error: (flags[i] & 1) !== 0 }
      }
      this.#results = results
      this.#texts = []
    }
    if (out.done) {
      this.#done = true
      this.#stopListening?.()
      this.#stopListening = undefined
      Turn.#abandon.unregister(this)
      // The tool uses and kept texts are no longer needed (the results hold what they need).
      this.#calls.uses = []
      this.#calls.scopes = []
      this.#texts = []
      this.#release()
    }
    this.#idle = out.idle
    this.#holdLoop()
    if (out.events.length > 0 || out.done) {
      const waiters = this.#waiters
      this.#waiters = []
      for (const resolve of waiters) resolve()
    }
  }

  // While someone awaits the turn, a timer keeps the turn reachable (its wake function reaches
  // it weakly) and, while the turn waits on something native (an async-runtime timer such as a
  // timeout or a cleanup grace, a call's native task, a wake on its way), the event loop alive.
  // While the turn waits on JavaScript alone (its tools' promises, a submit or seal), the timer
  // is unref'd: as with `Promise.all`, a tool that never settles and nothing else pending lets
  // the process exit. Released when the turn is done.
  #wait() {
    if (this.#keepAlive === null) {
      this.#keepAlive = setInterval(() => this.#native, 2 ** 30)
      if (this.#idle) this.#keepAlive.unref()
    }
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  /** Refs or unrefs the keep-alive timer as the last poll found the turn (see #wait). */
  #holdLoop() {
    const keepAlive = this.#keepAlive
    if (keepAlive === null) return
    if (this.#idle) keepAlive.unref()
    else keepAlive.ref()
  }

  #release() {
    if (this.#keepAlive !== null) {
      clearInterval(this.#keepAlive)
      this.#keepAlive = null
    }
  }

  /**
   * Submits `tool_use` blocks ({ id, name, input }); they start as soon as admission allows,
   * each in the async context of this call (AsyncLocalStorage values active here are visible
   * inside the tools).
   */
  submit(...toolUses) {
    this._submitAll(toolUses, true)
  }

  /**
   * @internal Submits an array of `tool_use` blocks (`owned`: the array is the turn's to keep,
   * else it is copied).
   */
  _submitAll(toolUses, owned) {
    // By index, not forEach: forEach skips an array's holes, which the encoding then read.
    for (let i = 0; i < toolUses.length; i++) {
      const use = toolUses[i]
      if (!isObject(use) || typeof use.id !== 'string' || typeof use.name !== 'string') {
        // Which entry, and what it lacks: `input` is optional (a call without one runs with {}).
        if (Array.isArray(use)) {
          // `submit(uses)` for `submit(...uses)`: "`id` is no string" sent the caller to check ids.
          throw new InvalidArgumentError(`tool use ${i} is an array: pass the tool uses themselves (submit(a, b) or submit(...uses); run([a, b]))`)
        }
        const field = !isObject(use) ? 'it is no object' : typeof use.id !== 'string' ? '`id` is no string' : '`name` is no string'
        throw new InvalidArgumentError(`tool use ${i} needs a string \`id\` and \`name\` (and may have an \`input\`): ${field}`)
      }
    }
    const safeties = []
    let encoded
    try {
      encoded = this.#encode(toolUses, null, safeties)
    } catch (err) {
      if (!(err instanceof UnsendableInput)) throw err
      // Rare: some input JSON cannot carry (a BigInt, a cycle, a throwing toJSON or getter).
      // Each such call is refused on its own (the core answers it in place, as an invalid
      // input), and the others still run: every tool_use gets its one tool_result, and a
      // submit (or run) does not fail as a whole for one call's input.
      const refused = new Map()
      for (let k = 0; k < toolUses.length; k++) {
        const reason = unsendableReason(inputOf(toolUses[k]))
        if (reason !== undefined) refused.set(k, reason)
      }
      try {
        encoded = this.#encode(toolUses, refused, safeties)
      } catch {
        // An input whose JSON form changed between two tries (a toJSON or getter that throws
        // at times): no call is submitted.
        throw new InvalidArgumentError('a tool use input cannot be sent as JSON: its JSON form changed from one try to the next (a toJSON or getter that throws at times)')
      }
    }
    callNative(() => this.#native.submit(encoded.items, encoded.ids, encoded.extra))
    const calls = this.#calls
    // The calls start in the async context of this submit (captured once for the batch).
    const scope = new CallerScope()
    if (calls.uses.length === 0) {
      calls.uses = owned ? toolUses : toolUses.slice()
      calls.scopes = new Array(toolUses.length).fill(scope)
    } else {
      for (const use of toolUses) {
        calls.uses.push(use)
        calls.scopes.push(scope)
      }
    }
    calls.reserve(calls.uses.length)
    this.#schedule()
  }

  /**
   * The native submission of `toolUses`: `tool, flags, idLength` per call, the ids one after
   * the other, and (as JSON) only what the native side cannot know: unknown tools' names and
   * the inputs it must validate. Throws an UnsendableInput when an input JSON cannot carry,
   * unless `refused` (position → reason) names it: such a call is submitted refused, with its
   * reason instead of its input, and the core answers it in place ("Invalid input for tool
   * ...", or its unknown-tool result), never run. `safeties`: the per-input concurrency decisions, by
   * position, made on the first encoding and reused (a predicate decides a call once).
   */
  #encode(toolUses, refused, safeties) {
    const items = new Uint32Array(3 * toolUses.length)
    const ids = new Array(toolUses.length)
    const extra = []
    for (let k = 0; k < toolUses.length; k++) {
      const use = toolUses[k]
      const input = inputOf(use)
      const tool = this.#tool(use.name)
      let flags = 0
      if (refused?.has(k)) {
        // The input is not sent (it cannot be): its reason is.
        if (tool === undefined) extra.push(use.name)
        extra.push(`the input cannot be sent as JSON: ${refused.get(k)}`)
        items[3 * k] = tool === undefined ? UNKNOWN_TOOL : tool.index
        items[3 * k + 1] = SUBMIT_REFUSED
        items[3 * k + 2] = use.id.length
        ids[k] = use.id
        continue
      }
      if (tool?.safety !== undefined) {
        // Decided now, on the input as submitted.
        safeties[k] ??= decideSafety(tool.safety, input)
        flags |= SUBMIT_DECIDED | (safeties[k] ? SUBMIT_SAFE : 0)
      }
      if (tool === undefined) extra.push(use.name)
      if (tool === undefined || tool.hasSchema || !isPlainObject(input)) {
        flags |= SUBMIT_HAS_INPUT
        extra.push(input)
      }
      items[3 * k] = tool === undefined ? UNKNOWN_TOOL : tool.index
      items[3 * k + 1] = flags
      items[3 * k + 2] = use.id.length
      ids[k] = use.id
    }
    let json = ''
    if (extra.length > 0) {
      try {
        json = stringify(extra)
      } catch {
        throw new UnsendableInput()
      }
    }
    return { items, ids: ids.join(''), extra: json }
  }

  /** The declaration of tool `name` (undefined for an unknown tool). */
  #tool(name) {
    if (name !== this.#lastToolName) {
      this.#lastTool = this.#tools.get(name)
      this.#lastToolName = this.#lastTool === undefined ? undefined : name
    }
    return this.#lastTool
  }

  /** No more tool uses: the turn ends once every submitted call is answered. */
  seal() {
    callNative(() => this.#native.seal())
    this.#schedule()
  }

  /** @internal Seals the turn and drops its events: the results arrive all at once. */
  _finish() {
    callNative(() => this.#native.finish())
    this.#finishing = true
    this.#schedule()
  }

  /** Cancels running and queued calls; each still gets its is_error result. */
  cancel() {
    callNative(() => this.#native.cancel())
    this.#schedule()
  }

  /**
   * @internal Cancels for `reason` (a run's AbortSignal reason): the aborted calls'
   * `ctx.signal.reason` carries it as its `cause`, as fetch passes a signal's reason on.
   */
  _cancel(reason) {
    if (this.#cancelCause === undefined) this.#cancelCause = reason
    this.cancel()
  }

  /**
   * @internal Aborting `signal` cancels and seals the turn, as leaving its loop does. The
   * listener reaches the turn weakly: a long-lived signal does not keep an abandoned turn (whose
   * collection cancels its calls) alive.
   */
  _abortOn(signal) {
    const self = this.#self
    this.#stopListening = onAbort(signal, () => {
      const turn = self.deref()
      if (turn === undefined || turn.#done) return
      turn._cancel(signal.reason)
      turn.seal()
    })
  }

  /** Cancels and seals (the model response will be replayed). */
  discard() {
    callNative(() => this.#native.discard())
    this.#schedule()
  }

  /** @internal Forgets the results (run() handed them over and never asks again). */
  _forgetResults() {
    this.#results = []
  }

  /**
   * Seals the turn and resolves with every result, in submission order (wire-shaped
   * `tool_result` blocks, the turn budget applied), as Python's `Turn.results()` does. Called
   * again, it resolves with the same results.
   */
  async results() {
    // As Python's: waiting for a seal() nobody will call would never settle.
    if (!this.#done) callNative(() => this.#native.seal())
    this.#schedule()
    while (!this.#done) await this.#wait()
    return this.#results
  }

  /**
   * Events as they happen (started, progress, finished, detached) and results in order.
   * Leaving the loop before the turn is done (break, return, a throw: the iterator's
   * `return()`, also before its first `next()`) cancels and seals the turn; that iterator is
   * then done.
   */
  [Symbol.asyncIterator]() {
    let pending = 0
    let read = false
    // An iterator closed unread while another loop follows the turn was never its follower.
    const iterator = closableIterator(this.#follow(), () => (this.#followers === 0 && this.#reader === null ? this.#leave() : undefined))
    const next = iterator.next
    iterator.next = (value) => {
      if (this.#reader !== null && this.#reader !== iterator) {
        return Promise.reject(new InvalidStateError("a Turn is followed by one loop at a time: another loop is waiting for its events (each would get only some of them)"))
      }
      if (!read) {
        read = true
        // Ended in #follow's finally.
        this.#followers++
      }
      this.#reader = iterator
      pending++
      const settled = () => {
        if (--pending === 0 && this.#reader === iterator) this.#reader = null
      }
      const step = next.call(iterator, value)
      // Registered before the caller's reaction: the turn is free again when the caller resumes.
      step.then(settled, settled)
      return step
    }
    return iterator
  }

  async *#follow() {
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
      this.#followers--
      if (this.#waiters.length === 0) this.#release()
      this.#leave()
    }
  }

  /**
   * Nobody follows the turn any more (a loop left early, an iterator closed unread): its calls
   * are aborted (as leaving a Client stream's loop cancels the request), and every call still
   * gets its result.
   */
  #leave() {
    if (this.#done) return
    this._cancel(new AbortError("the loop over the turn's events was left early"))
    this.seal()
  }
}

/**
 * A native executor's reply batcher: replies (and progress reports) settled in one tick go back
 * to Rust in one `completeJson` call, as one flat `[callId, flags, content, ...]` array (one
 * boundary crossing and one wake for a burst of quick tools). `delivered`, if given, is called
 * after each batch (in the same microtask).
 */
function replyBatcher(target, delivered) {
  let pending = []
  const flush = () => {
    const replies = pending
    pending = []
    // A lone surrogate in a text or a progress datum keeps JSON.stringify's escape: the native
    // reader takes such a batch item by item and reads the escape as U+FFFD (js_tools.rs).
    try {
      callNative(() => target.completeJson(JSON.stringify(replies)))
    } finally {
      delivered?.()
    }
  }
  // Replies and progress reports share the batch, so their order is kept.
  return (callId, flags, content) => {
    if (pending.length === 0) queueMicrotask(flush)
    pending.push(callId, flags, content)
  }
}

/**
 * A native executor with what its turns share: the reply batcher, the tools' JS details and
 * `host`, the tool host of its calls (its own table of running calls: see `withOwnCalls`).
 */
function nativeExecutorWithBatching(nativeExecutor, tools, host) {
  return { native: nativeExecutor, complete: replyBatcher(nativeExecutor), tools, host }
}

class ToolExecutor {
  #options
  #specs = new Map()
  /** name → { safety?: (input) => boolean, hasSchema } (what a turn needs at submission) */
  #tools = new Map()
  /**
   * The tool functions. Runs and turns go through the host of the native executor they start
   * on (`#executor()`), which shares these functions and keeps its own running calls.
   */
  #host = new ToolHost()
  #native = null

  /** @param {import('./index').ToolExecutorOptions} [options] */
  constructor(given) {
    const options = checkedOptions(given, EXECUTOR_OPTIONS, 'ToolExecutor')
    // String() made any value a directory name (`{}` spilled into `./[object Object]`).
    const spillDir = optionalPath(options.spillDir, 'ToolExecutor: spillDir')
    this.#options = {
      maxConcurrency: optionalNumber(options.maxConcurrency, 'maxConcurrency'),
      defaultTimeoutMs: optionalNumber(options.defaultTimeoutMs, 'defaultTimeoutMs'),
      cleanupGraceMs: optionalNumber(options.cleanupGraceMs, 'cleanupGraceMs'),
      defaultMaxResultChars: optionalNumber(options.defaultMaxResultChars, 'defaultMaxResultChars'),
      turnBudgetChars: optionalNumber(options.turnBudgetChars, 'turnBudgetChars'),
      spillDir,
    }
    // Validate now rather than at the first run.
    callNative(() => new native.ToolExecutor(this.#options, []))
  }

  /**
   * Registers a tool. `fn(input, ctx)` may return a string, an array of content blocks, one
   * content block (an object with a `type`), or `{ content, isError }` (any other JSON value
   * is sent as its JSON text), synchronously or as a Promise; throwing or rejecting produces an
   * is_error result. `ctx.signal` aborts on timeout or cancellation.
   */
  tool(declaration, fn) {
    // An empty name is the core registry's to refuse (at the trial build below).
    if (!isObject(declaration) || typeof declaration.name !== 'string') {
      throw new InvalidArgumentError('tool(spec, fn): spec.name must be a string')
    }
    const spec = checkedOptions(declaration, TOOL_OPTIONS, `tool ${declaration.name}`)
    if (typeof fn !== 'function') throw new InvalidArgumentError(`tool ${spec.name}: fn must be a function`)
    if (this.#specs.has(spec.name)) throw new InvalidArgumentError(`a tool named '${spec.name}' is already registered`)
    if (spec.schema !== undefined && !isObject(spec.schema)) {
      throw new InvalidArgumentError(`tool ${spec.name}: schema must be a JSON Schema object`)
    }
    if (spec.description !== undefined && typeof spec.description !== 'string') {
      throw new InvalidArgumentError(`tool ${spec.name}: description must be a string`)
    }
    const safety = typeof spec.concurrencySafe === 'function' ? spec.concurrencySafe : undefined
    const nativeSpec = {
      name: spec.name,
      description: spec.description,
      concurrencySafe: safety === undefined ? optionalBoolean(spec.concurrencySafe, 'concurrencySafe') : undefined,
      safetyPerInput: safety !== undefined,
      timeoutMs: optionalNumber(spec.timeoutMs, 'timeoutMs'),
      maxResultChars: optionalNumber(spec.maxResultChars, 'maxResultChars'),
      schemaJson: spec.schema === undefined ? undefined : toJson(spec.schema, `tool ${spec.name}: the schema`),
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

  /** The registered tools' names, in registration order. */
  get toolNames() {
    return [...this.#specs.keys()]
  }

  #executor() {
    if (this.#native === null) {
      this.#native = nativeExecutorWithBatching(
        callNative(() => new native.ToolExecutor(this.#options, [...this.#specs.values()])),
        this.#tools,
        this.#host.withOwnCalls(),
      )
    }
    return this.#native
  }

  /** @internal What an Agent needs to run these tools inside its own loop. */
  _internals() {
    return { options: this.#options, specs: [...this.#specs.values()], host: this.#host, tools: this.#tools }
  }

  /**
   * Starts a streaming turn. Aborting `signal` cancels its running and queued calls and seals it
   * (each call still gets its is_error result), as leaving its loop early does.
   */
  turn(options) {
    const signal = checkSignal(checkedOptions(options, SIGNAL_OPTIONS, 'turn').signal, 'turn')
    if (signal?.aborted) throw new AbortError('the turn was aborted before it started', { cause: signal.reason })
    const turn = new Turn(this.#executor())
    if (signal !== undefined) turn._abortOn(signal)
    return turn
  }

  /**
   * Runs a batch of `tool_use` blocks; resolves with one `tool_result` per use, in request
   * order. Aborting `signal` aborts running tools (through `ctx.signal`) and rejects with an
   * AbortError.
   */
  async run(toolUses, options) {
    const signal = checkSignal(checkedOptions(options, SIGNAL_OPTIONS, 'run').signal, 'run')
    if (!Array.isArray(toolUses)) throw new InvalidArgumentError('run(toolUses): toolUses must be an array')
    if (signal?.aborted) throw new AbortError('the run was aborted before it started', { cause: signal.reason })
    const turn = new Turn(this.#executor())
    turn._submitAll(toolUses, false)
    turn._finish()
    const unsubscribe = signal === undefined ? undefined : onAbort(signal, () => turn._cancel(signal.reason))
    try {
      const results = await turn.results()
      turn._forgetResults()
      if (signal?.aborted) throw new AbortError('the run was aborted', { cause: signal.reason })
      return results
    } finally {
      unsubscribe?.()
    }
  }
}

/** @internal */
function executorInternals(executor) {
  return executor._internals()
}

module.exports = { ToolExecutor, Turn, executorInternals, replyBatcher, decideSafety }
