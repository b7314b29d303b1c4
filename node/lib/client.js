'use strict'
// Client: the native streaming HTTP client (retries, backoff, watchdogs, decoding). Requests run
// on the native async runtime; their items arrive in batches through a native EventStream.

const native = require('../index.js')
const { AbortError, InvalidArgumentError, InvalidStateError, InternalError, callNative, fromErrorItem, toFerroloopError, providerJson, optionalNumber, optionalString, isPlainObject, checkKeys, checkedOptions, withoutNulls } = require('./errors.js')
const { onAbort, checkSignal } = require('./abort.js')
const { closableIterator, ReadAhead } = require('./iterate.js')

const PROVIDERS = new Set(['anthropic', 'openai-chat', 'openai-responses'])
const isObject = (v) => v !== null && typeof v === 'object'

function abortErrorFor(signal, message) {
  return new AbortError(message, { cause: signal?.reason })
}

/** Unsubscribes an ItemSource collected before it ended from its signal. */
const unlistenWhenCollected = new FinalizationRegistry((unsubscribe) => unsubscribe())

/**
 * Pulls the items of a native EventStream: every batch the native side has ready at once; when
 * none is, waits for the stream's waker. `signal` aborts the native producer (the HTTP request,
 * the agent run).
 * @internal
 */
class ItemSource {
  #native
  #batch = []
  #head = 0
  #ended = false
  #aborted = false
  #unsubscribe
  /** Resolves the wait for the waker (null when nobody waits). */
  #waiter = null
  /**
   * While someone waits, a ref'd timer keeps the event loop alive (the waker is unref'd: the
   * work runs on the native runtime, which Node does not see) and this source reachable.
   */
  #keepAlive = null
  /**
   * The producer may wait on JavaScript alone (an agent run settling its JavaScript tools'
   * calls): the timer is then unref'd (see #holdLoop).
   */
  #waitsOnHost

  constructor(nativeStream, signal, waitsOnHost = false) {
    this.#native = nativeStream
    this.#waitsOnHost = waitsOnHost
    // The native stream holds its waker for as long as it lives: a closure over this source
    // would be a cycle through a native root, and an abandoned stream would never be collected.
    // Nor may it close over the native stream: a closure made here would share this
    // constructor's scope, which holds `nativeStream`, so the waker is made outside it.
    const self = new WeakRef(this)
    const wake = ItemSource.#wakerOf(self)
    callNative(() => nativeStream.setWaker(wake))
    if (signal !== undefined) {
      // The callback reaches this source weakly, and is unsubscribed once the source is
      // collected: a long-lived signal (a server's shutdown signal given to every request)
      // would otherwise keep every stream nobody read to its end, native stream and buffered
      // items included, and collect one callback per such stream. A collected source's native
      // stream is dropped, which cancels its request: nothing is left to abort.
      this.#unsubscribe = onAbort(signal, ItemSource.#abortOf(self))
      unlistenWhenCollected.register(this, this.#unsubscribe, this)
    }
  }

  /** The waker of the source `self` refers to (a closure over `self` alone). */
  static #wakerOf(self) {
    return () => self.deref()?.#wake()
  }

  /** The abort listener of the source `self` refers to (a closure over `self` alone). */
  static #abortOf(self) {
    return () => self.deref()?.abort()
  }

  #wake() {
    const resolve = this.#waiter
    if (resolve === null) {
      // Nobody waits: the native side asks for a report of the memory it holds (a stream
      // nobody reads, which V8 would otherwise take for a few words). A waiting reader's
      // takeJson reports it.
      // Also once the last item was read: the producer may end after that read, and its state
      // go only then. From a waker, an error would be uncaught: a report missed is retried by
      // the next.
      try {
        this.#native.reportMemory()
      } catch {}
      return
    }
    this.#waiter = null
    if (this.#keepAlive !== null) {
      clearInterval(this.#keepAlive)
      this.#keepAlive = null
    }
    resolve?.()
  }

  /** The next item, or undefined once the stream has ended. */
  async next() {
    while (this.#head >= this.#batch.length) {
      if (this.#ended) return undefined
      let text
      try {
        text = this.#native.takeJson()
      } catch (err) {
        this.#end()
        throw toFerroloopError(err)
      }
      if (text === undefined) {
        await new Promise((resolve) => {
          const earlier = this.#waiter
          this.#waiter =
            earlier === null
              ? resolve
              : () => {
                  earlier()
                  resolve()
                }
          if (this.#keepAlive === null) this.#keepAlive = setInterval(() => this.#native, 2 ** 30)
          this.holdLoop()
        })
        continue
      }
      if (text === null) {
        this.#end()
        return undefined
      }
      this.#batch = JSON.parse(text)
      this.#head = 0
    }
    const item = this.#batch[this.#head]
    this.#batch[this.#head++] = undefined
    return item
  }

  /**
   * While someone waits: holds the event loop while the producer works, lets it go while the
   * producer waits on JavaScript alone (its tools' promises: as with `Promise.all`, a tool that
   * never settles, with nothing else pending, lets the process exit). Called when a wait
   * begins, and by the agent whenever JavaScript gave the run something (a tool's reply or
   * progress, started calls) or it may have come to wait.
   */
  holdLoop() {
    const keepAlive = this.#keepAlive
    if (keepAlive === null || !this.#waitsOnHost) return
    if (callNative(() => this.#native.waitsOnlyOnHost())) keepAlive.unref()
    else keepAlive.ref()
  }

  /**
   * Cancels the native producer. The signal is not listened to any more: nothing is left for
   * it to abort (a signal reused for many requests would otherwise keep one callback per
   * request left early).
   */
  abort() {
    if (this.#ended) return
    this.#aborted = true
    this.#unlisten()
    callNative(() => this.#native.abort())
    // The run stops its calls on a native grace: the loop is held until it has.
    this.holdLoop()
  }

  /** The final item was read: stop listening to the signal. */
  close() {
    this.#end()
  }

  #end() {
    this.#ended = true
    this.#unlisten()
  }

  #unlisten() {
    if (this.#unsubscribe !== undefined) {
      this.#unsubscribe()
      this.#unsubscribe = undefined
      unlistenWhenCollected.unregister(this)
    }
  }

  /** abort() was called (or the signal fired) before the stream ended. */
  get aborted() {
    return this.#aborted
  }

  get ended() {
    return this.#ended
  }
}

/** The error an `error` item stands for (an AbortError carries the signal's reason). */
function errorOf(item, signal) {
  if (item.error.code === 'aborted') return abortErrorFor(signal, item.error.message)
  return fromErrorItem(item.error)
}

/** A streaming response: typed events as an async iterable, then the final message. */
class MessageStream {
  #source
  #signal
  #iterating = false
  /** The events, taken by the loop and read ahead by message() (see ReadAhead). */
  #ahead = new ReadAhead(() => this.#read())
  #message = null
  #metrics = null
  #done
  #resolve
  #reject

  /** @internal */
  constructor(source, signal) {
    this.#source = source
    this.#signal = signal
    this.#done = new Promise((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
    })
    // Observed through message(); without this an unread failure would be an unhandled rejection.
    this.#done.catch(() => {})
  }

  /**
   * Typed events (`text_delta`, `tool_use_ready`, ..., `retry`, `stalled`); throws the request's
   * error. Leaving the loop early cancels the request, unless its `message_stop` was read: the
   * answer is whole, and message() still gives it. The events message() read first wait for
   * the loop: it gets every one.
   */
  [Symbol.asyncIterator]() {
    return closableIterator(this.#events(), () => this.#leaveUnread())
  }

  async *#events() {
    if (this.#iterating) throw new InvalidStateError('a MessageStream can be iterated once')
    this.#iterating = true
    // The provider's end marker was handed out: only the final message is left to read.
    let complete = false
    try {
      for (;;) {
        // Throws the request's error, with which #read settled the stream.
        const item = await this.#ahead.take()
        if (item === undefined) return
        if (item.type === 'message_stop') complete = true
        yield item
      }
    } finally {
      // Nobody takes the events any more.
      this.#ahead.drop()
      // Leaving the loop early (break, an exception in the body) cancels the request, unless
      // message() has read it to its end meanwhile.
      if (!this.#source.ended) this.#leave(complete)
    }
  }

  /**
   * The next event, or null once the final message has settled the stream; throws the
   * request's error, having settled the stream with it.
   */
  async #read() {
    let item
    try {
      item = await this.#source.next()
    } catch (err) {
      // The native stream failed (no error item): the stream is settled with that.
      this.#reject(err)
      throw err
    }
    if (this.#source.aborted) {
      // Aborted before the message was read: an AbortError, as the documentation says, even
      // when the response had already arrived (the abort and the producer race; like fetch, a
      // body not yet read rejects once aborted).
      this.#source.close()
      const err = abortErrorFor(this.#signal, 'the request was aborted')
      this.#reject(err)
      throw err
    }
    if (item === undefined) {
      const err = new InternalError('the native stream ended without a message')
      this.#reject(err)
      throw err
    }
    if (item.type === 'message' || item.type === 'error') this.#source.close()
    if (item.type === 'message') {
      this.#message = item.message
      this.#metrics = item.metrics
      this.#resolve(item.message)
      return null
    }
    if (item.type === 'error') {
      // A failed request's measurements are final too (what was attempted, received, when).
      this.#metrics = item.metrics ?? null
      const err = errorOf(item, this.#signal)
      this.#reject(err)
      throw err
    }
    return item
  }

  /**
   * A loop left before the final message. After `message_stop` the rest is read in the
   * background (message() gives the answer, metrics its figures); before, the request is
   * cancelled.
   */
  #leave(complete) {
    if (complete) {
      this.#drain()
      return
    }
    this.#source.abort()
    this.#reject(abortErrorFor(this.#signal, 'the stream was abandoned before the message completed'))
    // Settled: message() reads no further (a read under way sees the abort).
    this.#ahead.close()
  }

  /** An iterator closed before its first next(): cancels, as leaving a loop early does. */
  #leaveUnread() {
    // Another iterator reads the stream; this one was never its reader.
    if (this.#iterating) return
    this.#iterating = true
    this.#leave(false)
  }

  #drain() {
    // Nobody takes these events any more (the loop dropped them); #read settles the stream
    // with the message or the error.
    this.#ahead.finish()
  }

  /**
   * The final message, in the provider's non-streaming shape; rejects with the request's error
   * (a StreamTruncatedError carries `partial`, the message received so far). Reads the rest of
   * the stream itself, also while a loop iterates it: that loop may never read on (its iterator
   * dropped between two next() calls, or awaiting this in its body), and it gets the events
   * read here before it. Called before any loop, the stream counts as iterated.
   */
  async message() {
    if (!this.#iterating) {
      // No loop will take the events (a later one is refused, as a second loop is).
      this.#iterating = true
      this.#ahead.drop()
    }
    await this.#ahead.finish()
    return this.#done
  }

  /** Alias of {@link message}. */
  finalMessage() {
    return this.message()
  }

  /** Cancels the request now (the iteration throws an AbortError). */
  abort() {
    this.#source.abort()
  }

  /**
   * The request's measurements once it ended, with its message or with an error (a failed
   * request's attempts, retries, bytes and timings up to the failure); null before, and after
   * an abort.
   */
  get metrics() {
    return this.#metrics
  }

  /** The final message once completed (else null). */
  get completedMessage() {
    return this.#message
  }
}

const CLIENT_OPTIONS = ['provider', 'apiKey', 'baseUrl', 'maxRetries', 'retryBaseDelayMs', 'retryMaxDelayMs', 'timeouts', 'headers', 'anthropicVersion', 'anthropicBeta', 'fromEnv']
const TIMEOUT_OPTIONS = ['connectMs', 'firstByteMs', 'firstEventMs', 'idleMs', 'stallNoticeMs', 'totalMs']
const REQUEST_OPTIONS = ['signal']

function nativeOptions(options) {
  if (!isObject(options)) throw new InvalidArgumentError('Client options must be an object')
  checkKeys(options, CLIENT_OPTIONS, 'Client')
  const { provider, apiKey, baseUrl, maxRetries, retryBaseDelayMs, retryMaxDelayMs, timeouts: given, headers, anthropicVersion, anthropicBeta, fromEnv } =
    withoutNulls(options)
  let timeouts = given
  if (timeouts !== undefined && !isPlainObject(timeouts)) {
    // A Map or an array is an object too, but its entries are no own keys: it set nothing.
    throw new InvalidArgumentError('timeouts must be a plain object ({ connectMs, firstByteMs, firstEventMs, idleMs, stallNoticeMs, totalMs })')
  }
  if (timeouts !== undefined) {
    checkKeys(timeouts, TIMEOUT_OPTIONS, 'Client timeouts')
    timeouts = withoutNulls(timeouts)
    for (const [name, value] of Object.entries(timeouts)) optionalNumber(value, `timeouts.${name}`)
  }
  if (provider !== undefined && !PROVIDERS.has(provider)) {
    throw new InvalidArgumentError(`unknown provider ${JSON.stringify(provider)} (expected anthropic, openai-chat or openai-responses)`)
  }
  if (maxRetries !== undefined && !(Number.isInteger(maxRetries) && maxRetries >= 0)) {
    throw new InvalidArgumentError('maxRetries must be a non-negative integer')
  }
  if (fromEnv !== undefined && typeof fromEnv !== 'boolean') throw new InvalidArgumentError('fromEnv must be a boolean')
  if (headers !== undefined) checkHeaders(headers)
  for (const [name, value] of Object.entries({ apiKey, baseUrl, anthropicVersion })) optionalString(value, name)
  for (const [name, value] of Object.entries({ retryBaseDelayMs, retryMaxDelayMs })) optionalNumber(value, name)
  if (anthropicBeta !== undefined && !(Array.isArray(anthropicBeta) && anthropicBeta.every((beta) => typeof beta === 'string'))) {
    throw new InvalidArgumentError('anthropicBeta must be an array of strings')
  }
  return { provider, apiKey, baseUrl, maxRetries, retryBaseDelayMs, retryMaxDelayMs, timeouts, headers, anthropicVersion, anthropicBeta, fromEnv }
}

/**
 * Headers are a plain object of name → string. A Map, a Headers or an array is an object too,
 * but its entries are not own properties: it would have sent nothing (a Map) or headers named
 * `0`, `1`, ... (an array).
 */
function checkHeaders(headers) {
  if (!isPlainObject(headers)) {
    throw new InvalidArgumentError('headers must be a plain object of header names to strings (for a Map or a Headers: Object.fromEntries(headers))')
  }
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') throw new InvalidArgumentError(`headers: the value of ${JSON.stringify(name)} must be a string`)
  }
}

function requestJson(request, what) {
  if (!isObject(request) || Array.isArray(request)) throw new InvalidArgumentError(`${what}: the request must be an object`)
  return providerJson(request, `${what}: the request`)
}

/** A client for one provider endpoint (Anthropic Messages or OpenAI-compatible). */
class Client {
  #native

  /** @param {import('./index').ClientOptions} [options] */
  constructor(options = {}) {
    this.#native = callNative(() => new native.Client(nativeOptions(options)))
  }

  /** `anthropic`, `openai-chat` or `openai-responses`. */
  get provider() {
    return callNative(() => this.#native.provider)
  }

  /** The endpoint's base URL. */
  get baseUrl() {
    return callNative(() => this.#native.baseUrl)
  }

  /** @internal The native client (for Agent). */
  get _native() {
    return this.#native
  }

  /** Starts a streaming request (`stream: true` is set for you). */
  stream(request, options) {
    const signal = checkSignal(checkedOptions(options, REQUEST_OPTIONS, 'stream').signal, 'stream')
    const body = requestJson(request, 'stream')
    if (signal?.aborted) {
      const stream = new MessageStream(new AbortedSource(), signal)
      return stream
    }
    const source = new ItemSource(callNative(() => this.#native.streamJson(body)), signal)
    return new MessageStream(source, signal)
  }

  /** A non-streaming request; resolves with the provider's JSON response. */
  async create(request, options) {
    const signal = checkSignal(checkedOptions(options, REQUEST_OPTIONS, 'create').signal, 'create')
    const body = requestJson(request, 'create')
    if (signal?.aborted) throw abortErrorFor(signal, 'the request was aborted before it started')
    const source = new ItemSource(callNative(() => this.#native.createJson(body)), signal)
    const item = await source.next()
    source.close()
    // Aborted while the response was on its way: an AbortError even if it arrived meanwhile.
    if (source.aborted) throw abortErrorFor(signal, 'the request was aborted')
    if (item === undefined) throw new InternalError('the native request ended without a response')
    if (item.type === 'error') throw errorOf(item, signal)
    return item.body
  }
}

/** The source of a stream whose signal was aborted before it started. */
class AbortedSource {
  ended = false
  close() {
    this.ended = true
  }
  async next() {
    this.ended = true
    return { type: 'error', error: { code: 'aborted', message: 'the request was aborted before it started' } }
  }
  abort() {}
}

module.exports = { Client, MessageStream, ItemSource }
