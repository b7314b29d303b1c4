'use strict'
// The iterator the async iterables of this package hand out.

/**
 * Wraps the iterator of an async generator so that closing it before its first `next()` still
 * runs `leave`. A generator that never started runs neither its body nor its `finally` block on
 * `return()`/`throw()`, so "leaving the loop early cancels" would not hold for an iterator
 * closed unread (`const it = run[Symbol.asyncIterator](); await it.return()`); once started,
 * the generator's own `finally` does the leaving. When `leave` returns a promise (an agent run
 * waiting for its tools to stop), `return()`/`throw()` settle after it.
 * @internal
 */
function closableIterator(generator, leave) {
  let started = false
  // What `leave` returned (a promise when leaving waits for the work to stop), else undefined.
  const leaveUnstarted = () => {
    if (started) return undefined
    started = true
    return leave()
  }
  return {
    next(value) {
      started = true
      return generator.next(value)
    },
    return(value) {
      const left = leaveUnstarted()
      if (left === undefined) return generator.return(value)
      return Promise.resolve(left).then(() => generator.return(value))
    },
    throw(error) {
      const left = leaveUnstarted()
      if (left === undefined) return generator.throw(error)
      return Promise.resolve(left).then(() => generator.throw(error))
    },
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

/** The queue entry of the producer's end. */
const END = Object.freeze({ end: true })

/**
 * One cursor over a producer's items, taken by a loop (`take()`) and read to the end, at the
 * same time, by whoever waits for the outcome (`finish()`: `message()`, `result()`). What
 * `finish()` reads before the loop took it waits in a queue for the loop, so the loop misses
 * nothing, and the outcome never depends on the loop reading on: a loop whose iterator was
 * dropped between two `next()` calls (never `return()`ed, which an iterator need not be), or
 * one awaiting the outcome in its body, never would. One read at a time reaches the producer.
 * @internal
 */
class ReadAhead {
  /** The next item, or null at the end; rejects with the failure that ends the items. */
  #read
  #queue = []
  #head = 0
  /** The read under way (one at a time), or null. */
  #reading = null
  /** The end or the failure was read (or the items were closed): nothing more is read. */
  #finished = false
  /** A loop may still take the queued items; once none will, they are not kept. */
  #keep = true

  constructor(read) {
    this.#read = read
  }

  /** Reads one more item into the queue, or waits for the read under way. Never rejects. */
  #fill() {
    if (this.#finished) return Promise.resolve()
    if (this.#reading === null) {
      this.#reading = this.#read().then(
        (item) => {
          this.#reading = null
          if (item === null) this.#end(END)
          else if (this.#keep) this.#queue.push({ item })
        },
        (error) => {
          this.#reading = null
          this.#end({ error })
        },
      )
    }
    return this.#reading
  }

  #end(entry) {
    if (this.#finished) return
    this.#finished = true
    if (this.#keep) this.#queue.push(entry)
  }

  /** For the loop: the next item, or undefined once the items ended; throws their failure. */
  async take() {
    while (this.#head >= this.#queue.length) {
      if (this.#finished) return undefined
      await this.#fill()
    }
    const entry = this.#queue[this.#head]
    this.#queue[this.#head++] = undefined
    if (this.#head === this.#queue.length) {
      this.#queue = []
      this.#head = 0
    }
    if (entry === END) return undefined
    if ('error' in entry) throw entry.error
    return entry.item
  }

  /** Reads to the end or the failure (what the loop has not taken stays queued for it). Never rejects. */
  async finish() {
    while (!this.#finished) await this.#fill()
  }

  /** No loop will take the items (it ended, or never started): they are not kept. */
  drop() {
    this.#keep = false
    this.#queue = []
    this.#head = 0
  }

  /** Nothing more is to be read (the producer was cancelled and its outcome settled). */
  close() {
    this.drop()
    this.#finished = true
  }
}

module.exports = { closableIterator, ReadAhead }
