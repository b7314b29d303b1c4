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

module.exports = { closableIterator }
