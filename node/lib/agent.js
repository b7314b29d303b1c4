'use strict'
// Agent: the native agent loop over a Client, with JS tools (registered on a ToolExecutor)
// and/or the native built-in tools. The loop runs on the native async runtime; JS tool calls
// are announced through an unref'd wake function and answered like the executor's.

const native = require('../index.js')
const { AbortError, InvalidArgumentError, InvalidStateError, InternalError, callNative, fromErrorItem, providerJson, optionalNumber, optionalBoolean, optionalString, optionalPath, checkKeys, checkedOptions, withoutNulls } = require('./errors.js')
const { Client, ItemSource } = require('./client.js')
const { onAbort, checkSignal } = require('./abort.js')
const { closableIterator, ReadAhead } = require('./iterate.js')
const { ToolExecutor, executorInternals, replyBatcher, decideSafety } = require('./exec.js')
const { CallerScope } = require('./tool-host.js')

const BUILTIN_TOOLS = new Set(['read', 'write', 'edit', 'glob', 'grep', 'bash'])
const AGENT_OPTIONS = [
  'model',
  'system',
  'tools',
  'workspace',
  'maxTurns',
  'maxTokens',
  'tokenBudget',
  'maxContinuations',
  'escalatedMaxTokens',
  'keepRecentToolResults',
  'fallbackModel',
  'fallbackAfter529Retries',
  'promptCaching',
  'tokenizer',
  'extra',
]
const RUN_OPTIONS = ['signal', 'messages']
const isObject = (v) => v !== null && typeof v === 'object'

// Agent events cross in the core's serialization (snake_case); API objects are camelCase in
// JS, durations in milliseconds with an `Ms` suffix. Payloads (input, usage, messages, data)
// keep their wire shape.
const RENAMES = {
  duration: 'durationMs',
  wait: 'waitMs',
  time_to_first_token: 'timeToFirstTokenMs',
  retry_after: 'retryAfterMs',
}
const camel = (key) => RENAMES[key] ?? key.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

function jsEvent(event) {
  const out = {}
  for (const key of Object.keys(event)) out[key === 'type' ? key : camel(key)] = event[key]
  return out
}

/** Calls the `ended` of an AgentRun collected before its stop event was read. */
const forgetWhenCollected = new FinalizationRegistry((ended) => ended())

/** A run: its events as an async iterable (the last is `stop`), or just the stop event. */
class AgentRun {
  #source
  // The agent that started the run: its tool host must live while the run can call tools.
  #agent
  #iterating = false
  /** The events, taken by the loop and read ahead by result() (see ReadAhead). */
  #ahead = new ReadAhead(() => this.#read())
  /** The stop event was read: the run has no more events. */
  #stopped = false
  #stop
  #resolve
  #reject

  /** Called when an iteration is left early: gives the run's tools the reason. */
  #leaving

  /**
   * @internal `ended` is called once the run's last item was read (the agent forgets why the
   * run was aborted); `leaving(reason)` records why the run is aborted when a loop is left early.
   */
  constructor(source, agent, ended, leaving) {
    this.#source = source
    this.#agent = agent
    this.#leaving = leaving
    this.#stop = new Promise((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
    })
    this.#stop.then(ended, ended)
    // A run nobody reads to its stop event (dropped by its caller) never settles #stop:
    // `ended` then runs once the run is collected, or the agent would keep the run's async
    // context, abort reason and signal listener for its whole lifetime.
    forgetWhenCollected.register(this, ended)
  }

  /**
   * The run's events, the last `stop`. Leaving the loop early (or closing the iterator before
   * reading) cancels the run, and the loop is left once the run's tools have stopped (or
   * outlived the executor's cleanup grace); result() then gives the cancelled run's stop event.
   * The events result() read first wait for the loop: it gets every one.
   */
  [Symbol.asyncIterator]() {
    return closableIterator(this.#events(), () => this.#leaveUnread())
  }

  async *#events() {
    if (this.#iterating) throw new InvalidStateError('an AgentRun can be iterated once')
    this.#iterating = true
    try {
      for (;;) {
        // Throws the run's error, with which #read settled result().
        const event = await this.#ahead.take()
        if (event === undefined) return
        yield event
      }
    } finally {
      // Nobody takes the events any more.
      this.#ahead.drop()
      // Leaving the loop (`break`, `return`, a throw in its body) waits here, in the iterator's
      // return(), until the cancelled run's tools have stopped; unless result() has read the
      // run to its stop meanwhile.
      if (!this.#source.ended) await this.#leaveEarly()
    }
  }

  /**
   * The run's next event, or null after its stop event (which settles result()); throws the
   * run's error, having settled result() with it.
   */
  async #read() {
    if (this.#stopped) return null
    try {
      const item = await this.#source.next()
      if (item === undefined) throw new InternalError('the agent run ended without a stop event')
      if (item.type === 'error') throw fromErrorItem(item.error)
      const event = jsEvent(item)
      if (event.type === 'stop') {
        this.#stopped = true
        this.#source.close()
        this.#resolve(event)
      }
      return event
    } catch (err) {
      this.#reject(err)
      throw err
    }
  }

  /**
   * Leaving early cancels the run (its tools are cancelled too). The cancelled run still ends
   * with its stop event, once its tools have stopped (or outlived the executor's cleanup
   * grace): the returned promise reads on to it (never rejecting), so that result() gives it
   * rather than waiting forever, and the loop left early resumes only then.
   */
  #leaveEarly() {
    this.#leaving?.(new AbortError("the loop over the run's events was left early"))
    this.#source.abort()
    return this.#drain()
  }

  /** An iterator closed before its first next(): cancels, as leaving a loop early does. */
  #leaveUnread() {
    // Another iterator reads the run; this one was never its reader.
    if (this.#iterating) return undefined
    this.#iterating = true
    return this.#leaveEarly()
  }

  /** Reads the rest of a run nobody iterates any more (#read settles result()). Never rejects. */
  #drain() {
    this.#ahead.drop()
    return this.#ahead.finish()
  }

  /**
   * The `stop` event (reason, final history, totals). After an iteration left early (which
   * cancels the run), the stop event of the cancelled run. Reads the rest of the run itself,
   * also while a loop iterates it: that loop may never read on (its iterator dropped between
   * two next() calls, or awaiting this in its body), and it gets the events read here before
   * it. Called before any loop, the run counts as iterated.
   */
  async result() {
    if (!this.#iterating) {
      // No loop will take the events (a later one is refused, as a second loop is).
      this.#iterating = true
      this.#ahead.drop()
    }
    await this.#ahead.finish()
    return this.#stop
  }

  /** Cancels the run: running tools are aborted; the run still ends with a `stop` event (reason `aborted`). */
  abort() {
    this.#source.abort()
  }
}



/** An agent's `extra` fields as JSON: an object of request fields, numbers JSON can hold. */
function extraJson(extra) {
  if (extra === undefined || extra === null) return undefined
  if (!isObject(extra) || Array.isArray(extra)) throw new InvalidArgumentError('Agent: extra must be an object of request fields')
  return providerJson(extra, 'Agent: extra')
}


/** Splits `tools` into a ToolExecutor (JS tools) and built-in tool names. */
function toolSources(tools) {
  if (tools === undefined || tools === null) return { executor: null, builtins: [] }
  const list = Array.isArray(tools) ? tools : [tools]
  let executor = null
  const builtins = []
  for (const entry of list) {
    if (entry instanceof ToolExecutor) {
      if (executor !== null) throw new InvalidArgumentError('Agent: give at most one ToolExecutor')
      executor = entry
    } else if (typeof entry === 'string') {
      if (!BUILTIN_TOOLS.has(entry)) {
        throw new InvalidArgumentError(`Agent: no built-in tool named ${JSON.stringify(entry)} (expected one of ${[...BUILTIN_TOOLS].join(', ')})`)
      }
      builtins.push(entry)
    } else {
      throw new InvalidArgumentError('Agent: tools must be a ToolExecutor, built-in tool names, or an array of them')
    }
  }
  return { executor, builtins }
}

/** An agent: the loop (model call, stream decode, tools, results, next turn) over a Client. */
class Agent {
  #native
  #host = null
  #complete = null
  /** name → { safety?, hasSchema, index } of the JS tools (see ToolExecutor). */
  #tools
  /** The id of the latest run (its tool calls and their aborts carry it). */
  #lastRunId = 0
  /** runId → the CallerScope of a run not yet ended (its tool calls start in it). */
  #scopes = new Map()
  /** runId → the reason its AbortSignal fired with (the cause of its tools' abort reasons). */
  #abortCauses = new Map()
  /** runId → a WeakRef to the ItemSource of a run not ended (see #holdLoops). */
  #sources = new Map()
  /** The names of the tools the agent runs, sorted. */
  #toolNames = []

  /**
   * @param {Client} client
   * @param {import('./index').AgentOptions} given
   */
  constructor(client, given) {
    if (!(client instanceof Client)) throw new InvalidArgumentError('Agent: the first argument must be a Client')
    // An empty or blank name (and the rest of the configuration) is the core's check's, below.
    if (!isObject(given) || typeof given.model !== 'string') {
      throw new InvalidArgumentError('Agent: options.model must be a string')
    }
    checkKeys(given, AGENT_OPTIONS, 'Agent')
    const options = withoutNulls(given)
    const { executor, builtins } = toolSources(options.tools)
    const internals =
      executor === null ? { options: {}, specs: [], host: null, tools: new Map() } : executorInternals(executor)
    const tools = internals.tools
    // The executor's tools, with a table of running calls of this agent's own (its calls are
    // numbered by its native loop, apart from the executor's and other agents').
    this.#host = internals.host?.withOwnCalls() ?? null
    const nativeOptions = {
      model: options.model,
      system: optionalString(options.system, 'system'),
      maxTurns: optionalNumber(options.maxTurns, 'maxTurns'),
      maxTokens: optionalNumber(options.maxTokens, 'maxTokens'),
      tokenBudget: optionalNumber(options.tokenBudget, 'tokenBudget'),
      maxContinuations: optionalNumber(options.maxContinuations, 'maxContinuations'),
      escalatedMaxTokens: optionalNumber(options.escalatedMaxTokens, 'escalatedMaxTokens'),
      keepRecentToolResults: optionalNumber(options.keepRecentToolResults, 'keepRecentToolResults'),
      promptCaching: optionalBoolean(options.promptCaching, 'promptCaching'),
      tokenizer: optionalString(options.tokenizer, 'tokenizer'),
      extraJson: extraJson(options.extra),
      workspace: optionalPath(options.workspace, 'workspace'),
      fallbackModel: optionalString(options.fallbackModel, 'fallbackModel'),
      fallbackAfter529Retries: optionalNumber(options.fallbackAfter529Retries, 'fallbackAfter529Retries'),
    }
    // The native agent holds the wake and decide functions for its lifetime, and a
    // thread-safe function holds its JS callback as a root: a callback reaching this agent
    // (through `this`, or through the tools, whose functions may refer to the agent) would
    // keep it alive forever. They reach the agent through a weak reference instead, and are
    // made outside this constructor, whose scope holds the tools; a run keeps its agent alive
    // while it is read.
    this.#tools = tools
    const self = new WeakRef(this)
    const wake = Agent.#wakeOf(self)
    const decide = Agent.#decideOf(self)
    this.#native = callNative(
      () => new native.Agent(client._native, nativeOptions, internals.options, internals.specs, builtins, wake, decide),
    )
    // After replies and progress reports: the runs they went to work again.
    this.#complete = replyBatcher(this.#native, Agent.#holdLoopsOf(self))
    this.#toolNames = [...internals.specs.map((spec) => spec.name), ...builtins].sort()
  }

  /** The wake function of the agent `self` refers to (a closure over `self` alone). */
  static #wakeOf(self) {
    return () => self.deref()?.#dispatch()
  }

  /** #holdLoops of the agent `self` refers to (a closure over `self` alone). */
  static #holdLoopsOf(self) {
    return () => self.deref()?.#holdLoops()
  }

  /**
   * Each run read now holds the event loop or lets it go as it works or waits on JavaScript
   * alone: called once JavaScript gave the runs something (replies, progress, started calls).
   * Synchronously: a run that got a reply works again before the event loop can end.
   */
  #holdLoops() {
    for (const source of this.#sources.values()) source.deref()?.holdLoop()
  }

  /**
   * The decide function of the agent `self` refers to: the loop admits calls on the native
   * runtime and asks here (as ToolExecutor turns decide at submission): a per-input predicate
   * decides each call from its input. A collected agent has nothing to decide (not safe).
   */
  static #decideOf(self) {
    return (question) => self.deref()?.#decide(question)
  }

  /**
   * Answers the question `[id, name, input]` through the native agent (not by returning: the
   * native side asks with a plain call, see DecideFn in src/agent.rs). A collected agent's
   * native agent is dropped, which answers its questions itself.
   */
  #decide(question) {
    const [id, name, input] = JSON.parse(question)
    const safety = this.#tools.get(name)?.safety
    const safe = safety === undefined ? false : decideSafety(safety, input)
    // Thrown from here, an error would be an uncaught exception (a native callback's caller is
    // the event loop); the question is then abandoned, and the call runs alone.
    try {
      callNative(() => this.#native.decided(id, safe))
    } catch {}
  }

  /**
   * Starts the JS tool calls the loop queued, then delivers the aborts (on the JS thread). In
   * that order: a call cancelled after it was queued has its start and its abort in one drain,
   * and the host ignores an abort for a call it has not started (the tool ran on unaborted).
   */
  #dispatch() {
    const out = JSON.parse(callNative(() => this.#native.drainToolsJson()))
    for (const call of out.invocations) {
      // In the async context agent.run() was called in (the wake-up that runs this has none).
      const scope = call.runId === undefined ? undefined : this.#scopes.get(call.runId)
      if (scope === undefined) this.#host.startInvocation(call, this.#complete)
      else scope.run(this.#host.startInvocation, this.#host, call, this.#complete)
    }
    for (const abort of out.aborts) {
      this.#host?.abort(abort, abort.run === undefined ? undefined : this.#abortCauses.get(abort.run))
    }
    // The calls started: a run waiting on them alone lets the event loop go.
    this.#holdLoops()
  }

  /** The names of the tools the agent runs (its JS and built-in tools), sorted. */
  get toolNames() {
    return this.#toolNames.slice()
  }

  /** The tool definitions sent to the model (sorted by name). */
  toolDefinitions() {
    return JSON.parse(callNative(() => this.#native.toolDefinitionsJson()))
  }

  /**
   * Runs the loop for `prompt` (a string or content blocks), or continues `messages` (ending
   * with a user message). Returns an AgentRun: `for await` its events, or `await run.result()`.
   * An invalid conversation makes no request: the run stops at once with reason 'error'.
   */
  run(prompt, options) {
    const { signal: given, messages } = checkedOptions(options, RUN_OPTIONS, 'run')
    const signal = checkSignal(given, 'run')
    let history
    const noPrompt = prompt === undefined || prompt === null
    if (!(noPrompt && messages !== undefined) && typeof prompt !== 'string' && !Array.isArray(prompt)) {
      throw new InvalidArgumentError('run: the prompt must be a string or an array of content blocks')
    }
    if (messages !== undefined) {
      if (!Array.isArray(messages)) throw new InvalidArgumentError('run: messages must be an array')
      history = noPrompt ? messages : [...messages, { role: 'user', content: prompt }]
    } else {
      history = [{ role: 'user', content: prompt }]
    }
    // An already-aborted signal: the run starts cancelled (no request), and still ends with its
    // `stop` event (reason `aborted`).
    const aborted = signal?.aborted === true
    const runId = (this.#lastRunId = (this.#lastRunId + 1) >>> 0)
    // Listening before the source does: the reason is known here by the time the aborted
    // calls are dispatched, and their ctx.signal.reason carries it as its cause (as
    // ToolExecutor.run() does with its signal's reason).
    // (The closures hold the maps, not the agent: a signal outliving the agent keeps only them.)
    const causes = this.#abortCauses
    const scopes = this.#scopes
    const sources = this.#sources
    const unsubscribe = signal === undefined ? undefined : onAbort(signal, () => causes.set(runId, signal.reason))
    const ended = () => {
      unsubscribe?.()
      causes.delete(runId)
      scopes.delete(runId)
      sources.delete(runId)
    }
    let source
    try {
      const json = providerJson(history, 'run: the conversation')
      source = new ItemSource(callNative(() => this.#native.runJson(json, aborted, runId)), signal, true)
    } catch (err) {
      ended()
      throw err
    }
    sources.set(runId, new WeakRef(source))
    // The run's tools start in the async context of this call (AsyncLocalStorage values active
    // here are visible inside them), captured once for the run.
    scopes.set(runId, new CallerScope())
    if (aborted) source.abort()
    // Leaving a loop early: the tools learn why (unless the signal said so first).
    const leaving = (reason) => {
      if (!causes.has(runId)) causes.set(runId, reason)
    }
    return new AgentRun(source, this, ended, leaving)
  }
}

module.exports = { Agent, AgentRun }
