'use strict'
// The offsets of a batch (node/src/batch.rs): a Uint32Array the native side fills through a byte
// view of its memory, reused from call to call: [count, then `stride` values per item].

const { callNative } = require('./errors.js')

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
 * `chunk` as a Uint8Array over the same memory (no copy), or null when it holds no bytes: a
 * Uint8Array (a Buffer, a subarray) as is; any other view (DataView, another typed array, a
 * Uint8Array of another realm) as its own window of its buffer, never the whole buffer; an
 * ArrayBuffer or SharedArrayBuffer whole. What Python's feed takes as "any buffer".
 */
function byteView(chunk) {
  if (chunk instanceof Uint8Array) return chunk
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  const tag = Object.prototype.toString.call(chunk)
  if (tag === '[object ArrayBuffer]' || tag === '[object SharedArrayBuffer]') return new Uint8Array(chunk)
  return null
}

module.exports = { BatchOffsets, byteView }
