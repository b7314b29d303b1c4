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

module.exports = { BatchOffsets }
