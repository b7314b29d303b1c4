'use strict'
// One 'abort' listener per AbortSignal for all of ferroloop's operations on it. A signal shared
// by many concurrent operations (a server's shutdown signal given to every request, one signal
// for a batch of runs) would otherwise carry one listener per operation, and Node warns
// (MaxListenersExceededWarning) from the eleventh listener on one signal, as if they leaked.

/** signal -> its fan-out: the subscribed callbacks, in subscription order, and the listener. */
const fanOuts = new WeakMap()

const { InvalidArgumentError } = require('./errors.js')

const nothing = () => {}

/** A `signal` option: an AbortSignal, or undefined for none (`null` too); anything else is refused, naming `what`. */
function checkSignal(signal, what) {
  if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`${what}: signal must be an AbortSignal`)
  }
  return signal ?? undefined
}

/**
 * Calls `callback` once when `signal` aborts, unless the returned function is called first; that
 * function unsubscribes (calling it again does nothing). Callbacks run in the order they
 * subscribed, as listeners of their own would; one unsubscribed while the others run is skipped,
 * and one that throws is reported as an uncaught exception (as an event listener's would be)
 * without keeping the rest from running. A signal that has already aborted never calls it.
 *
 * The returned function holds the signal and the callback, nothing of the caller's: it can be
 * the held value of a FinalizationRegistry.
 */
function onAbort(signal, callback) {
  if (signal.aborted) return nothing
  let fanOut = fanOuts.get(signal)
  if (fanOut === undefined) {
    const callbacks = new Map()
    const listener = () => {
      fanOuts.delete(signal)
      for (const [key, subscribed] of callbacks) {
        callbacks.delete(key)
        try {
          subscribed()
        } catch (err) {
          process.nextTick(() => {
            throw err
          })
        }
      }
    }
    fanOut = { callbacks, listener }
    fanOuts.set(signal, fanOut)
    signal.addEventListener('abort', listener, { once: true })
  }
  const key = {}
  fanOut.callbacks.set(key, callback)
  const subscribedTo = fanOut
  return () => {
    if (!subscribedTo.callbacks.delete(key) || subscribedTo.callbacks.size > 0) return
    // The last operation on the signal is done: leave nothing on it.
    if (fanOuts.get(signal) === subscribedTo) fanOuts.delete(signal)
    signal.removeEventListener('abort', subscribedTo.listener)
  }
}

module.exports = { onAbort, checkSignal }
