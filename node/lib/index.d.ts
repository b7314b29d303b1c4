// Types of the `ferroloop` package (hand-written: the generated ../index.d.ts describes the raw
// native layer, whose batch encoding and untyped errors are not part of the public API).

/** Options shared by every FerroloopError constructor. */
export interface FerroloopErrorOptions {
  code?: FerroloopErrorCode | (string & {})
  status?: number | null
  requestId?: string | null
  cause?: unknown
}

/** The stable error codes. */
export type FerroloopErrorCode =
  | 'invalid_argument'
  | 'internal'
  | 'timeout'
  | 'stream_truncated'
  | 'protocol'
  | 'rate_limited'
  | 'overloaded'
  | 'prompt_too_long'
  | 'aborted'

/** Base class of every error ferroloop throws. */
export declare class FerroloopError extends Error {
  constructor(message: string, options?: FerroloopErrorOptions)
  /** Stable, machine-readable code. */
  readonly code: FerroloopErrorCode | (string & {})
  /** HTTP status, for errors that came from a provider response; otherwise null. */
  readonly status: number | null
  /** Provider request id when known; otherwise null. */
  readonly requestId: string | null
}
/** An argument had the wrong type or an invalid value (`code: 'invalid_argument'`). */
export declare class InvalidArgumentError extends FerroloopError {
  readonly code: 'invalid_argument'
}
/** A bug in ferroloop, e.g. a caught Rust panic (`code: 'internal'`). */
export declare class InternalError extends FerroloopError {
  readonly code: 'internal'
}
/** An operation ran past its deadline (`code: 'timeout'`). */
export declare class TimeoutError extends FerroloopError {
  readonly code: 'timeout'
}
/** The stream ended before the message completed (`code: 'stream_truncated'`). */
export declare class StreamTruncatedError extends FerroloopError {
  readonly code: 'stream_truncated'
}
/** The peer broke the wire protocol (`code: 'protocol'`). */
export declare class ProtocolError extends FerroloopError {
  readonly code: 'protocol'
}
/** The provider rate-limited the request (`code: 'rate_limited'`). */
export declare class RateLimitedError extends FerroloopError {
  readonly code: 'rate_limited'
}
/** The provider is overloaded (`code: 'overloaded'`). */
export declare class OverloadedError extends FerroloopError {
  readonly code: 'overloaded'
}
/** The request does not fit the context window (`code: 'prompt_too_long'`). */
export declare class PromptTooLongError extends FerroloopError {
  readonly code: 'prompt_too_long'
}
/** The operation was aborted through an AbortSignal (`name: 'AbortError'`, `code: 'aborted'`). */
export declare class AbortError extends FerroloopError {
  readonly code: 'aborted'
}

/** Converts an error thrown by the native layer into its FerroloopError; other values pass through. */
export declare function toFerroloopError(err: unknown): unknown

/** One dispatched Server-Sent Event. */
export interface SseEvent {
  /** The event type (`message` when the stream named none). */
  event: string
  /** The data lines joined with `\n`. */
  data: string
  /** The last event id at dispatch time (persists across events; `''` when none). */
  id: string
}

/** Options of {@link SseParser}. */
export interface SseParserOptions {
  /** Drop a pending event larger than this many bytes; parsing resumes after the next blank line. */
  maxEventBytes?: number
}

/** A WHATWG Server-Sent-Events parser: feed byte chunks split anywhere, get the completed events. */
export declare class SseParser {
  constructor(options?: SseParserOptions)
  /** Feeds one chunk; returns the events it completed, in order. */
  feed(chunk: Uint8Array): SseEvent[]
  /** Ends the stream; true when an unterminated event was discarded. */
  finish(): boolean
  /** Reconnection time from the last valid `retry` field, in milliseconds, or null. */
  readonly retry: number | null
  /** The last event id seen. */
  readonly lastEventId: string
  /** Events dropped for exceeding `maxEventBytes`. */
  readonly droppedEvents: number
}

/** @internal Panics inside the native panic boundary (used by the test suite). */
export declare function _debugPanic(message?: string): void
