'use strict'
// StreamDecoder: raw provider SSE bytes in, typed events and the accumulated message out.

const native = require('../index.js')
const { BatchOffsets, byteView } = require('./batch.js')
const { InvalidArgumentError, toFerroloopError, checkedOptions } = require('./errors.js')

// The events of a chunk arrive as one batch (node/src/decode.rs, `feedBatch`): a text and, in a
// reused array, [count, then kind, index, start, end per event]. Kind 0: the span is the event's
// JSON; kinds 1-5: a text delta, built here with the keys in the order the JSON form has them.
function decodeBatch(text, offsets, count) {
  const events = new Array(count)
  for (let i = 0, k = 1; i < count; i++, k += 4) {
    const a = offsets[k + 2]
    const b = offsets[k + 3]
    switch (offsets[k]) {
      case 1:
        events[i] = { type: 'text_delta', index: offsets[k + 1], text: text.substring(a, b) }
        break
      case 2:
        events[i] = { type: 'input_json_delta', index: offsets[k + 1], partial_json: text.substring(a, b) }
        break
      case 3:
        events[i] = { type: 'thinking_delta', index: offsets[k + 1], thinking: text.substring(a, b) }
        break
      case 4:
        events[i] = { type: 'refusal_delta', index: offsets[k + 1], refusal: text.substring(a, b) }
        break
      case 5:
        events[i] = { type: 'signature_delta', index: offsets[k + 1], signature: text.substring(a, b) }
        break
      default:
        events[i] = JSON.parse(text.substring(a, b))
    }
  }
  return events
}

class StreamDecoder {
  #native
  #offsets = new BatchOffsets(4)
  #provider

  /**
   * Without a provider (no options, or `provider` absent or null) the stream is Anthropic's, as
   * Python's `StreamDecoder()` and Node's own `new Client()` default to.
   * @param {{ provider?: 'anthropic' | 'openai-chat' | 'openai-responses', events?: boolean }} [options]
   */
  constructor(given) {
    const options = checkedOptions(given, ['provider', 'events'], 'StreamDecoder')
    const provider = options.provider === undefined ? 'anthropic' : options.provider
    if (typeof provider !== 'string') {
      throw new InvalidArgumentError("StreamDecoder option provider must be 'anthropic', 'openai-chat' or 'openai-responses'")
    }
    if (options.events !== undefined && typeof options.events !== 'boolean') {
      throw new InvalidArgumentError('StreamDecoder option events must be a boolean')
    }
    this.#native = this.#call(() => new native.StreamDecoder({ provider, events: options.events }))
    this.#provider = provider
  }

  /** The wire format decoded: `anthropic`, `openai-chat` or `openai-responses`. */
  get provider() {
    return this.#provider
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

  /** Feeds raw bytes (split anywhere; any binary view, see byteView); returns the typed events they completed. */
  feed(input) {
    const chunk = byteView(input, 'StreamDecoder.feed')
    if (chunk === null) {
      throw new InvalidArgumentError('StreamDecoder.feed expects bytes: a Buffer, a Uint8Array, another typed array, a DataView or an ArrayBuffer')
    }
    const text = this.#call(() => this.#native.feedBatch(chunk, this.#offsets.bytes))
    if (text === null) return []
    const count = this.#offsets.values[0]
    const offsets = this.#offsets.fit(count, this.#native)
    return decodeBatch(text, offsets, count)
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
