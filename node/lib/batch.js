'use strict'
// The offsets of a batch (node/src/batch.rs): a Uint32Array the native side fills through a byte
// view of its memory, reused from call to call: [count, then `stride` values per item].

const { callNative, InvalidArgumentError } = require('./errors.js')

class BatchOffsets {
  /** @param {number} stride values per item */
  constructor(stride) {
    this.stride = stride
    this.values = new Uint32Array(1 + stride * 256)
    // The view the native side writes through (cheaper per call than a Uint32Array argument).
    this.bytes = new Uint8Array(this.values.buffer)
  }

  /**
   * The offsets of a batch of `count` items `native` just returned. When they did not fit,
   * grows the array and fetches them with `native.takeOffsets`.
   */
  fit(count, native) {
    if (1 + this.stride * count <= this.values.length) return this.values
    const capacity = Math.max(count, 2 * Math.floor((this.values.length - 1) / this.stride))
    const grown = new Uint32Array(1 + this.stride * capacity)
    callNative(() => native.takeOffsets(new Uint8Array(grown.buffer, 4)))
    grown[0] = count
    this.values = grown
    this.bytes = new Uint8Array(grown.buffer)
    return grown
  }
}

/**
 * `chunk` as a Uint8Array over the same memory (no copy), or null when it is not bytes: a
 * Uint8Array (a Buffer, a subarray) as is; any other view (DataView, another typed array, a
 * Uint8Array of another realm) as its own window of its buffer, never the whole buffer; an
 * ArrayBuffer or SharedArrayBuffer whole. What Python's feed takes as "any buffer". A detached
 * buffer (transferred, or a closed stream's), or a view of one, throws an InvalidArgumentError
 * naming `what` (`SseParser.feed`): it has no bytes to read, and was either a bare TypeError
 * (an ArrayBuffer) or read as an empty chunk (a view), a chunk lost without a word.
 */
function byteView(chunk, what) {
  if (chunk instanceof Uint8Array) return attachedBytes(chunk, what)
  if (ArrayBuffer.isView(chunk)) {
    // Checked first: a detached DataView's byteLength getter throws a bare TypeError.
    if (isDetached(chunk.buffer)) throw detachedError(what, 'view')
    return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  }
  const tag = Object.prototype.toString.call(chunk)
  if (tag === '[object ArrayBuffer]' || tag === '[object SharedArrayBuffer]') {
    if (isDetached(chunk)) throw detachedError(what, 'buffer')
    return new Uint8Array(chunk)
  }
  return null
}

/**
 * `bytes` (a Uint8Array, taken as it is), or an InvalidArgumentError naming `what` when its
 * buffer is detached: read as empty, it was counted as no text at all.
 */
function attachedBytes(bytes, what) {
  // A view of a detached buffer has length 0: only then is the buffer looked at.
  if (bytes.byteLength === 0 && isDetached(bytes.buffer)) throw detachedError(what, 'view')
  return bytes
}

/** Whether `buffer` (an ArrayBuffer or SharedArrayBuffer, of any realm) is detached. */
function isDetached(buffer) {
  // `detached` is Node 20's (ES2024); before it, only a detached buffer refuses a view.
  if (typeof buffer.detached === 'boolean') return buffer.detached
  try {
    new Uint8Array(buffer)
    return false
  } catch {
    return true
  }
}

function detachedError(what, kind) {
  const subject = kind === 'view' ? "the view's ArrayBuffer" : 'the ArrayBuffer'
  return new InvalidArgumentError(`${what}: ${subject} is detached (transferred, or a closed stream's): it has no bytes to read`)
}

module.exports = { BatchOffsets, byteView, attachedBytes }
