'use strict'
// SseParser: the native parser returns each chunk's events as one batch (a string plus UTF-16
// offsets, see node/src/sse.rs); this wrapper slices it into `{ event, data, id }` objects.

const native = require('../index.js')
const { BatchOffsets, byteView } = require('./batch.js')
const { InvalidArgumentError, callNative, toFerroloopError, checkedOptions, numberArg } = require('./errors.js')

// Event types the native side has interned (node/src/sse.rs, `TypeTable`): both sides append a
// type sent as text while they hold fewer than this many, so their indexes agree.
const TYPE_TABLE_CAP = 64

// Offsets arrive in a reused array: [count, then six offsets per event from index 1]. A type's
// pair (a, b) with a > b refers to entry a - 1 of `types`; otherwise it is a span of `text`.
function decodeBatch(text, offsets, count, types) {
  const events = new Array(count)
  let typeStart = -1
  let typeEnd = -1
  let spanType = ''
  let type = ''
  let idStart = -1
  let idEnd = -1
  let id = ''
  for (let i = 0, k = 1; i < count; i++, k += 6) {
    const a = offsets[k]
    const b = offsets[k + 1]
    if (a > b) {
      type = types[a - 1]
    } else {
      // Repeated types share one span in the batch once the table is full: slice them once.
      // The slice is kept apart from `type`, which references in between may change.
      if (a !== typeStart || b !== typeEnd) {
        typeStart = a
        typeEnd = b
        spanType = text.substring(a, b)
        if (types.length < TYPE_TABLE_CAP) types.push(spanType)
      }
      type = spanType
    }
    if (offsets[k + 4] !== idStart || offsets[k + 5] !== idEnd) {
      idStart = offsets[k + 4]
      idEnd = offsets[k + 5]
      id = text.substring(idStart, idEnd)
    }
    events[i] = { event: type, data: text.substring(offsets[k + 2], offsets[k + 3]), id }
  }
  return events
}

class SseParser {
  #native
  #offsets = new BatchOffsets(6)
  // The interned event types (see decodeBatch); every batch returned must be decoded, in order.
  #types = []

  /** @param {{ maxEventBytes?: number }} [options] */
  constructor(options) {
    const { maxEventBytes } = checkedOptions(options, ['maxEventBytes'], 'SseParser')
    if (maxEventBytes !== undefined) numberArg(maxEventBytes, 'SseParser: maxEventBytes')
    this.#native = callNative(() => new native.SseParser({ maxEventBytes }))
  }

  /** Feeds a chunk of bytes (split anywhere; any binary view, see byteView); returns the events it completed, in order. */
  feed(input) {
    const chunk = byteView(input, 'SseParser.feed')
    if (chunk === null) {
      throw new InvalidArgumentError('SseParser.feed expects bytes: a Buffer, a Uint8Array, another typed array, a DataView or an ArrayBuffer')
    }
    let text
    // try/catch inline rather than through callNative: a closure per chunk was measurable.
    try {
      text = this.#native.feedBatch(chunk, this.#offsets.bytes)
    } catch (err) {
      throw toFerroloopError(err)
    }
    if (text === null) return []
    const count = this.#offsets.values[0]
    const offsets = this.#offsets.fit(count, this.#native)
    return decodeBatch(text, offsets, count, this.#types)
  }

  /** Ends the stream; returns true when an unterminated event was discarded. */
  finish() {
    return callNative(() => this.#native.finish())
  }

  /** Reconnection time from the last valid `retry` field (ms), or null. */
  get retry() {
    return this.#native.retry
  }

  /**
   * The last event id: what a reconnection sends as Last-Event-ID. An id field takes effect at
   * the blank line that ends its event (also one with no data, which yields no event); until
   * then the previous value is returned, and an event cut off by finish() never changes it.
   */
  get lastEventId() {
    return this.#native.lastEventId
  }

  /** Events dropped for exceeding `maxEventBytes`. */
  get droppedEvents() {
    return this.#native.droppedEvents
  }

  /** Total bytes fed so far. */
  get bytesFed() {
    return this.#native.bytesFed
  }
}

// decodeBatch is exported for benches/node/sse-floor.mjs (the JavaScript share of SseParser.feed,
// timed on recorded batches); lib/index.js does not re-export it.
module.exports = { SseParser, decodeBatch }
