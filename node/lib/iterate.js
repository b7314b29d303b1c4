'use strict'
// The iterator the async iterables of this package hand out.

/**
 * Wraps the iterator of an async generator so that closing it before its first `next()` still
 * runs `leave`. A generator that never started runs neither its body nor its `finally` block on
 * `return()`/`throw()`, so "leaving the loop early cancels" would not hold for an iterator
 * closed unread (`const it = run[Symbol.asyncIterator](); await it.return()`); once started,
 * the generator's own `finally` does the leaving.
 * @internal
 */
function closableIterator(generator, leave) {
  let started = false
  const leaveUnstarted = () => {
    if (started) return
    started = true
    leave()
  }
  return {
    next(value) {
      started = true
      return generator.next(value)
    },
    return(value) {
      leaveUnstarted()
      return generator.return(value)
    },
    throw(error) {
      leaveUnstarted()
      return generator.throw(error)
    },
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

module.exports = { closableIterator }
