'use strict'
// StreamDecoder: raw provider SSE bytes in, typed events and the accumulated message out.

const native = require('../index.js')
const { InvalidArgumentError, toFerroloopError } = require('./errors.js')

class StreamDecoder {
  #native

  /** @param {{ provider: 'anthropic' | 'openai-chat' | 'openai-responses', events?: boolean }} options */
  constructor(options) {
    if (options === null || typeof options !== 'object' || typeof options.provider !== 'string') {
      throw new InvalidArgumentError("StreamDecoder needs { provider: 'anthropic' | 'openai-chat' | 'openai-responses' }")
    }
    if (options.events !== undefined && typeof options.events !== 'boolean') {
      throw new InvalidArgumentError('StreamDecoder option events must be a boolean')
    }
    this.#native = this.#call(() => new native.StreamDecoder({ provider: options.provider, events: options.events }))
  }

  // Native errors become FerroloopErrors carrying their detail: `partial` (the message so far),
  // `events` (completed before the failure), and for provider errors `errorType` and `raw`.
  #call(fn) {
    try {
      return fn()
    } catch (err) {
      const out = toFerroloopError(err)
      const detail = this.#native === undefined ? null : this.#native.takeErrorDetail()
      if (detail !== null && out instanceof Error) Object.assign(out, JSON.parse(detail))
      throw out
    }
  }

  /** Feeds raw bytes (split anywhere); returns the typed events they completed. */
  feed(chunk) {
    if (!(chunk instanceof Uint8Array)) throw new InvalidArgumentError('StreamDecoder.feed expects a Buffer or Uint8Array')
    const events = this.#call(() => this.#native.feedJson(chunk))
    return events === null ? [] : JSON.parse(events)
  }

  /** The message accumulated so far, in the provider's response shape (null before any event). */
  message() {
    return JSON.parse(this.#call(() => this.#native.messageJson()))
  }

  /** Whether the stream reached its end marker. */
  get isComplete() {
    return this.#native.isComplete
  }

  /** Ends the input: the final message, or a StreamTruncatedError / provider error (with `partial`). */
  finish() {
    return JSON.parse(this.#call(() => this.#native.finishJson()))
  }
}

module.exports = { StreamDecoder }
