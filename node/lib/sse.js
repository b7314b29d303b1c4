'use strict'
// SseParser: the native parser returns each chunk's events as one batch (a string plus UTF-16
// offsets, see node/src/sse.rs); this wrapper slices it into `{ event, data, id }` objects.

const native = require('../index.js')
const { InvalidArgumentError, callNative } = require('./errors.js')

function decodeBatch(batch) {
  const { text, offsets } = batch
  const count = offsets.length / 6
  const events = new Array(count)
  let typeStart = -1
  let typeEnd = -1
  let type = ''
  let idStart = -1
  let idEnd = -1
  let id = ''
  for (let i = 0, k = 0; i < count; i++, k += 6) {
    // Repeated types and ids share one span in the batch: slice them once.
    if (offsets[k] !== typeStart || offsets[k + 1] !== typeEnd) {
      typeStart = offsets[k]
      typeEnd = offsets[k + 1]
      type = text.substring(typeStart, typeEnd)
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

  /** @param {{ maxEventBytes?: number }} [options] */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidArgumentError('SseParser options must be an object')
    }
    this.#native = callNative(() => new native.SseParser(options))
  }

  /** Feeds a chunk (split anywhere); returns the events it completed, in order. */
  feed(chunk) {
    if (!(chunk instanceof Uint8Array)) {
      throw new InvalidArgumentError('SseParser.feed expects a Buffer or Uint8Array')
    }
    const batch = callNative(() => this.#native.feedBatch(chunk))
    return batch === null ? [] : decodeBatch(batch)
  }

  /** Ends the stream; returns true when an unterminated event was discarded. */
  finish() {
    return callNative(() => this.#native.finish())
  }

  /** Reconnection time from the last valid `retry` field (ms), or null. */
  get retry() {
    return this.#native.retry
  }

  /** The last event id (persists across events). */
  get lastEventId() {
    return this.#native.lastEventId
  }

  /** Events dropped for exceeding `maxEventBytes`. */
  get droppedEvents() {
    return this.#native.droppedEvents
  }
}

module.exports = { SseParser }
