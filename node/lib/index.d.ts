// Types of the `ferroloop` package (hand-written: the generated ../index.d.ts describes the raw
// native layer, whose batch encoding and untyped errors are not part of the public API).
// A parameter taking a JSON object is typed `Record<string, any>`, not `Record<string, unknown>`:
// a value typed by an interface (an SDK's `MessageCreateParams`, `MessageParam`, `Usage`, a
// `JSONSchema7`) has no index signature and is no `Record<string, unknown>`. Array parameters
// are `readonly`: the runtime only reads them.

/** Options shared by every FerroloopError constructor. */
export interface FerroloopErrorOptions {
  /**
   * The code of a FerroloopError itself (default `internal`; null counts as absent). A
   * subclass's code is its own: the option does not change it (`new InvalidArgumentError(m,
   * { code: 'timeout' }).code` is `'invalid_argument'`).
   */
  code?: FerroloopErrorCode | (string & {}) | null
  /** HTTP status, for errors from a provider response (default null). */
  status?: number | null
  /** Provider request id when known (default null). */
  requestId?: string | null
  /** The underlying error or value (set as the standard `cause`). */
  cause?: unknown
}

/** The stable error codes. */
export type FerroloopErrorCode =
  | 'invalid_argument'
  | 'invalid_state'
  | 'internal'
  | 'timeout'
  | 'stream_truncated'
  | 'protocol'
  | 'rate_limited'
  | 'quota_exceeded'
  | 'overloaded'
  | 'prompt_too_long'
  | 'aborted'
  | 'provider_error'
  | 'authentication'
  | 'permission'
  | 'not_found'
  | 'invalid_request'
  | 'server'
  | 'connection'
  | 'unsupported'

/** Base class of every error ferroloop throws. */
export declare class FerroloopError extends Error {
  /**
   * An error with `message` and the code, status, request id and cause of `options` (each
   * absent one gets its default). Never throws.
   */
  constructor(message: string, options?: FerroloopErrorOptions | null)
  /** Stable, machine-readable code (Python's `err.code`, the same strings). */
  readonly code: FerroloopErrorCode | (string & {})
  /** HTTP status, for errors that came from a provider response; otherwise null. */
  readonly status: number | null
  /** Provider request id when known; otherwise null. */
  readonly requestId: string | null
}
/** An argument had the wrong type or an invalid value (`code: 'invalid_argument'`). */
export declare class InvalidArgumentError extends FerroloopError {
  /** Always `'invalid_argument'`. */
  readonly code: 'invalid_argument'
}
/**
 * A call the object's state refuses (`code: 'invalid_state'`, C's `FL_STATUS_INVALID_STATE`,
 * Python's `InvalidStateError`): bytes fed to a StreamDecoder after `finish()`, a tool use
 * submitted to a Turn after `seal()`, a second iteration of an AgentRun or a MessageStream, a
 * second loop over a Turn while another follows it.
 */
export declare class InvalidStateError extends FerroloopError {
  /** Always `'invalid_state'`. */
  readonly code: 'invalid_state'
}
/** A bug in ferroloop, e.g. a caught Rust panic (`code: 'internal'`). */
export declare class InternalError extends FerroloopError {
  /** Always `'internal'`. */
  readonly code: 'internal'
}
/** An operation ran past its deadline (`code: 'timeout'`). */
export declare class TimeoutError extends FerroloopError {
  /** Always `'timeout'`. */
  readonly code: 'timeout'
}
/** The stream ended before the message completed (`code: 'stream_truncated'`). */
export declare class StreamTruncatedError extends FerroloopError {
  /** Always `'stream_truncated'`. */
  readonly code: 'stream_truncated'
}
/** The peer broke the wire protocol (`code: 'protocol'`). */
export declare class ProtocolError extends FerroloopError {
  /** Always `'protocol'`. */
  readonly code: 'protocol'
}
/** The provider rate-limited the request (`code: 'rate_limited'`). */
export declare class RateLimitedError extends FerroloopError {
  /** Always `'rate_limited'`. */
  readonly code: 'rate_limited'
}
/**
 * The account has no credit left (`code: 'quota_exceeded'`): OpenAI's `insufficient_quota`
 * 429. Never retried (a retry gets the same answer); not a `RateLimitedError`.
 */
export declare class QuotaExceededError extends FerroloopError {
  /** Always `'quota_exceeded'`. */
  readonly code: 'quota_exceeded'
}
/** The provider is overloaded (`code: 'overloaded'`). */
export declare class OverloadedError extends FerroloopError {
  /** Always `'overloaded'`. */
  readonly code: 'overloaded'
}
/** The request does not fit the context window (`code: 'prompt_too_long'`). */
export declare class PromptTooLongError extends FerroloopError {
  /** Always `'prompt_too_long'`. */
  readonly code: 'prompt_too_long'
}
/** The operation was aborted through an AbortSignal (`name: 'AbortError'`, `code: 'aborted'`). */
export declare class AbortError extends FerroloopError {
  /** Always `'aborted'`. */
  readonly code: 'aborted'
}

/** The provider reported another error in the stream (`code: 'provider_error'`; Python's plain `APIError`). */
export declare class ProviderError extends FerroloopError {
  /** Always `'provider_error'`. */
  readonly code: 'provider_error'
}

/** The provider rejected the credentials (HTTP 401, `code: 'authentication'`). */
export declare class AuthenticationError extends FerroloopError {
  /** Always `'authentication'`. */
  readonly code: 'authentication'
}
/** The credentials may not do this (HTTP 403, `code: 'permission'`; Python's `PermissionDeniedError`). */
export declare class PermissionError extends FerroloopError {
  /** Always `'permission'`. */
  readonly code: 'permission'
}
/** No such endpoint or model (HTTP 404, `code: 'not_found'`; Python's `NotFoundError`). */
export declare class NotFoundError extends FerroloopError {
  /** Always `'not_found'`. */
  readonly code: 'not_found'
}
/** The provider rejected the request (another 4xx, `code: 'invalid_request'`; Python's `InvalidRequestError`). */
export declare class InvalidRequestError extends FerroloopError {
  /** Always `'invalid_request'`. */
  readonly code: 'invalid_request'
}
/**
 * The provider failed (5xx) and the retries ran out (`code: 'server'`; Python's `ServerError`);
 * `retryAfterMs` when the last response's `retry-after` named a wait.
 */
export declare class ServerError extends FerroloopError {
  /** Always `'server'`. */
  readonly code: 'server'
}
/** The connection could not be made or broke before any event (`code: 'connection'`). */
export declare class ConnectionError extends FerroloopError {
  /** Always `'connection'`. */
  readonly code: 'connection'
}
/** The feature is not available in this build or for this input (`code: 'unsupported'`). */
export declare class UnsupportedError extends FerroloopError {
  /** Always `'unsupported'`. */
  readonly code: 'unsupported'
}

/** Extra fields of errors thrown by {@link Client} requests. */
export interface ClientErrorDetail {
  /** StreamTruncatedError: the message received before the stream broke (provider shape). */
  partial?: any
  /**
   * StreamTruncatedError: the code of the cause (`connection`, `timeout`, `overloaded`,
   * `protocol`, ...); the breaking failure itself is the error's `cause` (a FerroloopError,
   * with the detail fields of its own kind: a timeout's `which` and `elapsedMs`, an oversized
   * event's `limit`, ...).
   */
  reason?: FerroloopErrorCode
  /** The provider's error type (`overloaded_error`, `rate_limit_error`, ...). */
  errorType?: string
  /**
   * RateLimitedError, OverloadedError and ServerError: the wait the server asked for
   * (`retry-after` on the 429, the 529 or the 5xx, a 503's say), in milliseconds; absent when it
   * named none, and for an error event inside a stream.
   */
  retryAfterMs?: number
  /**
   * TimeoutError: which watchdog fired (`'connect'`, `'first byte'`, `'first event'`, `'idle'`,
   * `'total'`; Python's `APITimeoutError.which`).
   */
  which?: 'connect' | 'first byte' | 'first event' | 'idle' | 'total'
  /** TimeoutError: the milliseconds that had passed when it fired (Python's `elapsed`, in s). */
  elapsedMs?: number
  /**
   * PromptTooLongError: the prompt's size in tokens when the provider's message said it, else
   * null (Python's `PromptTooLongError.tokens`).
   */
  tokens?: number | null
  /**
   * PromptTooLongError: the model's limit in tokens when the provider's message said it, else
   * null (Python's `PromptTooLongError.limit`); ProtocolError for an event larger than the
   * client's cap (64 MiB): that cap in bytes (Python's `ProtocolError.limit`).
   */
  limit?: number | null
}

/** Extra fields of errors thrown by {@link StreamDecoder}. */
export interface DecodeErrorDetail {
  /** The message accumulated before the failure (provider response shape). */
  partial?: unknown
  /** Typed events completed by the failing chunk before the error. */
  events?: DecodeEvent[]
  /** The provider's error type (`overloaded_error`, ...) or the decoder's code. */
  errorType?: string
  /** The provider's error payload as sent. */
  raw?: unknown
}

/**
 * The detail fields of the errors a provider's answer makes. These detail interfaces are merged
 * into the error classes of their names (a class and an interface of one name are one type), so
 * `err instanceof TimeoutError` reaches `err.which` without a cast. Each field is absent when
 * the error did not come with it (only a StreamDecoder's errors carry `events`; only a
 * provider's error event `raw`).
 */
type ProviderErrorDetail = Pick<ClientErrorDetail, 'partial' | 'errorType'> & Pick<DecodeErrorDetail, 'events' | 'raw'>
/** A truncated stream's message so far, why it broke (the cause's code) and, from a StreamDecoder, the events before. */
export interface StreamTruncatedError extends Pick<ClientErrorDetail, 'partial' | 'reason' | 'errorType'>, Pick<DecodeErrorDetail, 'events'> {}
/** Which watchdog fired, and when. */
export interface TimeoutError extends Pick<ClientErrorDetail, 'which' | 'elapsedMs'> {}
/** An oversized event's cap (`limit`); from a StreamDecoder, the message and events so far. */
export interface ProtocolError extends Pick<ClientErrorDetail, 'limit' | 'partial' | 'errorType'>, Pick<DecodeErrorDetail, 'events'> {}
/** The provider's error type, the wait it asked for, the message so far. */
export interface RateLimitedError extends ProviderErrorDetail, Pick<ClientErrorDetail, 'retryAfterMs'> {}
/** The provider's error type, the wait it asked for, the message so far. */
export interface OverloadedError extends ProviderErrorDetail, Pick<ClientErrorDetail, 'retryAfterMs'> {}
/** The provider's error type, the wait it asked for, the message so far. */
export interface ServerError extends ProviderErrorDetail, Pick<ClientErrorDetail, 'retryAfterMs'> {}
/** The prompt's size and the model's limit when the provider said them, its error type, the message so far. */
export interface PromptTooLongError extends ProviderErrorDetail, Pick<ClientErrorDetail, 'tokens' | 'limit'> {}
/** The provider's error type, the message so far. */
export interface QuotaExceededError extends ProviderErrorDetail {}
/** The provider's error type, the message so far. */
export interface ProviderError extends ProviderErrorDetail {}
/** The provider's error type, the message so far. */
export interface AuthenticationError extends ProviderErrorDetail {}
/** The provider's error type, the message so far. */
export interface PermissionError extends ProviderErrorDetail {}
/** The provider's error type, the message so far. */
export interface NotFoundError extends ProviderErrorDetail {}
/** The provider's error type, the message so far. */
export interface InvalidRequestError extends ProviderErrorDetail {}

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

/**
 * Options of {@link SseParser}. As in every options object of the API, a key not listed is an
 * `InvalidArgumentError` naming it and the class or call it was given to (Python refuses an
 * unknown keyword), and `null` counts as absent.
 */
export interface SseParserOptions {
  /**
   * Drop a pending event larger than this many bytes; parsing resumes after the next blank line.
   * A whole number from 1 to below 2^64 (a larger one is refused, not clamped). Default: no
   * limit.
   */
  maxEventBytes?: number | null
}

/** A WHATWG Server-Sent-Events parser: feed byte chunks split anywhere, get the completed events. */
export declare class SseParser {
  /**
   * A parser for one stream (no event size limit by default). Throws an InvalidArgumentError
   * for an unknown option or a `maxEventBytes` that is not a whole number from 1 to below 2^64.
   */
  constructor(options?: SseParserOptions)
  /**
   * Feeds one chunk of bytes: a Buffer or Uint8Array, another typed array or a DataView (its own
   * window of its buffer), or a whole ArrayBuffer; returns the events it completed, in order.
   * A detached ArrayBuffer (transferred), or a view of one, has no bytes to read: an
   * `InvalidArgumentError`, as is anything that is not bytes.
   */
  feed(chunk: ArrayBufferView | ArrayBufferLike): SseEvent[]
  /**
   * Ends the stream; true when an unterminated event (its id field included) was discarded.
   * `lastEventId` and `retry` are kept for a new stream (a reconnection).
   */
  finish(): boolean
  /** Reconnection time from the last valid `retry` field, in milliseconds, or null. */
  readonly retry: number | null
  /**
   * The last event id: what a reconnection sends as Last-Event-ID. An id field takes effect at
   * the blank line that ends its event (also one with no data, which yields no event); until
   * then the previous value is returned, and an event cut off by finish() never changes it. An
   * empty id field resets it to `''`.
   */
  readonly lastEventId: string
  /** Events dropped for exceeding `maxEventBytes`. */
  readonly droppedEvents: number
  /** Total bytes fed so far. */
  readonly bytesFed: number
}

/** @internal Panics inside the native panic boundary (used by the test suite). */
export declare function _debugPanic(message?: string): void
/** @internal Arms a panic at every native entry point (used by the test suite). */
export declare function _debugArmPanics(armed: boolean): void

/** A `tool_use` content block, as the model sends it. */
export interface ToolUse {
  /** `'tool_use'` on the wire (optional here). */
  type?: 'tool_use'
  /** The id the matching `tool_result` answers (`tool_use_id`). */
  id: string
  /** The tool to call. */
  name: string
  /**
   * The tool's input (validated against the tool's schema, if it has one). Absent: `{}`, the
   * core's rule, as in Python and C (a model's call to a tool without parameters).
   */
  input?: unknown
}

/** A content block inside a tool result (text, image, ...), in the provider's wire shape. */
export type ToolResultBlock = {
  /** The block's kind (`'text'`, `'image'`, ...); its other fields are the provider's for that kind. */
  type: string
  [key: string]: unknown
}

/** A `tool_result` content block, in the provider's wire shape. */
export interface ToolResult {
  /** Always `'tool_result'`. */
  type: 'tool_result'
  /** The `id` of the `tool_use` block this answers. */
  tool_use_id: string
  /** The tool's text, or content blocks. */
  content: string | ToolResultBlock[]
  /** Whether the call failed (threw, rejected, timed out, was cancelled, had an invalid input, ...). */
  is_error: boolean
}

/**
 * What a tool function may return (directly or through a Promise): text; content blocks (an
 * array holding anything else, file names say, is sent as its JSON text); one
 * content block (an object with a `type`, e.g. an image); `{ content, isError }`; nothing (an
 * empty result); any other JSON value is sent as its JSON text (a `Set` in it as an array, as
 * Python sends a set). As Python's tools. A value with no JSON form (a BigInt, a cycle, a `Map`,
 * a function, a symbol, a `toJSON()` that throws or gives undefined) gets an `is_error` result
 * saying so.
 */
export type ToolReturn =
  | string
  | readonly ToolResultBlock[]
  | { content: string | readonly ToolResultBlock[]; isError?: boolean }
  | null
  | undefined
  | number
  | boolean
  | Record<string, any>

/** The second argument of a tool function. */
export interface ToolCallContext {
  /**
   * Aborted on timeout (reason: TimeoutError), cancellation or abort of the run (reason:
   * AbortError; when the AbortSignal of `executor.run()` or `agent.run()` aborted it, the
   * AbortError's `cause` is that signal's reason; when a `for await` over a turn or an agent
   * run was left early, an AbortError saying so).
   */
  signal: AbortSignal
  /** The id of the `tool_use` block being answered. */
  toolUseId: string
  /** The tool's name. */
  name: string
  /** The call's position in its turn (in `run()`, in the `toolUses` array); Python's `ToolContext.index`. */
  index: number
  /**
   * Reports progress (any JSON value): a `progress` turn event / `tool_progress` agent event, at
   * once. Throws an {@link InvalidArgumentError} for data JSON cannot carry (a BigInt, a cycle, a
   * function, a symbol, a `Map`), as Python's `ctx.progress` raises `ValueError`; a `Set` is sent
   * as an array, as Python sends a set. Ignored once the call has
   * ended. Bound to its call, as every member here: `(input, { progress, signal }) => ...` works.
   */
  progress: (data: unknown) => void
}

/**
 * A tool implementation: sync or async; throwing or rejecting produces an is_error result, whose
 * text for an `Error` is `"TypeName: message"` (as a Python tool's exception reads).
 */
export type ToolFunction<Input = any> = (input: Input, ctx: ToolCallContext) => ToolReturn | Promise<ToolReturn>

/**
 * A tool declaration. A key not listed here (`timeout` for `timeoutMs`) is an
 * `InvalidArgumentError` naming it (`tool NAME: unknown option ...`); `null` counts as absent.
 */
export interface ToolDeclaration<Input = any> {
  /** The tool's name (unique per executor), as the model calls it. */
  name: string
  /** What the tool does: sent to the model in the tool's definition (an `Agent` run). */
  description?: string | null
  /**
   * May run in parallel with other safe calls (default false: runs alone, a barrier). A
   * function decides per call from the input, once: when the call is submitted to `run()` or
   * `turn().submit()`, or (in an `Agent` run) when the loop admits the model's call. A throwing
   * function makes the call exclusive.
   */
  concurrencySafe?: boolean | ((input: Input) => boolean) | null
  /**
   * Per-call timeout in milliseconds, at least 1 (anything under 1 ms, 0 included, is
   * refused; default: the executor's).
   */
  timeoutMs?: number | null
  /**
   * Result limit in characters (oversized results become a preview plus a spill file); Infinity
   * for none; default: the executor's `defaultMaxResultChars`. A whole number below 2^64 (a larger one is refused, not clamped). A result holding
   * a block other than text (an image) is delivered whole, by this limit and the turn budget
   * alike, in every language: only text results are replaced.
   */
  maxResultChars?: number | null
  /**
   * JSON Schema of the input; violating inputs get an is_error result without a call. Checked:
   * `type`, `enum`, `const`, `properties`, `required`, `additionalProperties`,
   * `patternProperties`, `propertyNames`, `dependentRequired`, `dependentSchemas`, `items`,
   * `prefixItems`, `additionalItems`, `contains`, the bounds (`minimum`, `maximum`,
   * `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `minLength`, `maxLength`, `minItems`,
   * `maxItems`, `uniqueItems`, `minProperties`, `maxProperties`), `pattern` (one the Rust regex engine cannot run, with look-around or
   * back-references, is not checked and logged as a warning), `allOf`, `anyOf`, `oneOf`,
   * `not`, `if`/`then`/`else` and `$ref` within the schema (one that resolves to nothing, or a
   * cycle of `$ref`s alone, is refused when the tool is added; one to another document is not
   * followed); other keywords (`format`, ...) are accepted and not checked.
   */
  schema?: Record<string, any> | null
  /** A failure cancels the running and later siblings of the same turn (shell-like tools). */
  cancelsSiblingsOnError?: boolean | null
}

/**
 * Options of {@link ToolExecutor}. A key not listed here (`maxConcurency`) is an
 * `InvalidArgumentError` naming it, as Python refuses an unknown keyword; `null` counts as
 * absent (the default: `turnBudgetChars: null` keeps the 200,000 budget, where Python's
 * `turn_budget_chars=None` disables it; `Infinity` disables it here, as Python's `math.inf`). Character counts are whole
 * numbers below 2^64; a larger one is refused, not clamped.
 */
export interface ToolExecutorOptions {
  /**
   * At most this many calls of one run or turn at once, at least 1 (0 is refused; default 10).
   * Runs of one executor at the same time admit their calls each on its own (the cap, and an
   * unsafe call's barrier, hold within a run).
   */
  maxConcurrency?: number | null
  /**
   * Timeout for tools that declare none, in milliseconds, at least 1 (anything under 1 ms, 0
   * included, is refused; default: none).
   */
  defaultTimeoutMs?: number | null
  /** Time a cancelled or timed-out tool gets to stop, in milliseconds (default 5000). */
  cleanupGraceMs?: number | null
  /** Result limit for tools that declare none, in characters (default 50,000). */
  defaultMaxResultChars?: number | null
  /** Aggregate limit of one turn's results in characters (default 200,000); Infinity disables it. */
  turnBudgetChars?: number | null
  /**
   * Directory for spill files of oversized results (default: `ferroloop-tool-results` in the OS
   * temp dir): a path or a `file:` URL. Another type, or the empty string, is an
   * `InvalidArgumentError`.
   */
  spillDir?: string | URL | null
}

/** Final status of one call. */
export type CallStatus =
  | 'succeeded'
  | 'failed'
  | 'fatal'
  | 'panicked'
  | 'timed_out'
  | 'cancelled'
  | 'skipped'
  | 'denied'
  | 'rejected'

/** Events of a streaming turn: lifecycle events as they happen, results in submission order. */
export type TurnEvent =
  /**
   * A call was admitted and its tool started; `queuedMs` is how long it waited for admission,
   * in milliseconds. `index` is the call's position in the turn (submission order).
   */
  | { type: 'started'; index: number; toolUseId: string; tool: string; queuedMs: number }
  /** A tool reported progress: `data` is what it passed to `ctx.progress`. */
  | { type: 'progress'; index: number; toolUseId: string; data: unknown }
  /**
   * A call ended (every call gets exactly one, started or not): `status` says how, `durationMs`
   * how long it ran in milliseconds (0 when it never started); `tool` is the name as requested
   * (also for an unknown tool).
   */
  | { type: 'finished'; index: number; toolUseId: string; tool: string; status: CallStatus; durationMs: number }
  /**
   * A cancelled or timed-out call outlived its cleanup grace (`cleanupGraceMs`): its result is
   * produced anyway and the tool goes on, detached.
   */
  | { type: 'detached'; index: number; toolUseId: string; tool: string }
  /** The `tool_result` of the call at `index`, in submission order. */
  | { type: 'result'; index: number; result: ToolResult }

/**
 * A streaming turn: submit tool uses as the model stream seals them, then seal. A turn dropped
 * unfinished (nobody refers to it or awaits it; a tool keeping its `ctx` does not keep the
 * turn) is garbage-collected, and its collection aborts the running calls: their `ctx.signal` fires (read then or later) with an
 * AbortError whose `cause` says the turn was collected. A running call of a tool with a timeout
 * (its own `timeoutMs` or the executor's `defaultTimeoutMs`) keeps its turn alive until it ends
 * or its timeout aborts it (`ctx.signal` fires with a TimeoutError); the turn is collected after.
 */
export declare class Turn implements AsyncIterable<TurnEvent> {
  private constructor()
  /**
   * Submits `tool_use` blocks; they start as soon as admission allows, in the async context of
   * this call (`AsyncLocalStorage` values active here are visible inside the tools). Throws an
   * InvalidStateError once the turn is sealed. A use whose input must cross as JSON (its tool
   * has a `schema`, or the input is no plain object) and cannot (a BigInt, a cycle, a throwing
   * `toJSON`) gets an `is_error` result ("Invalid input for tool ...") and its tool is not
   * called (an unknown tool's gets its unknown-tool result); the others run. A plain-object
   * input to a tool without a schema never crosses: the tool gets the object as given.
   */
  submit(...toolUses: ToolUse[]): void
  /**
   * No more tool uses: the turn ends once every submitted call is answered. Sealing a sealed
   * turn is a no-op, as in Python and C.
   */
  seal(): void
  /** Cancels running and queued calls; each still gets its is_error result. */
  cancel(): void
  /** Cancels and seals (the model response will be replayed). */
  discard(): void
  /**
   * Seals the turn (a later `submit` throws) and resolves with every result in submission order
   * once each call is answered: exactly one per submitted call, with the turn budget applied
   * (the results to send back; the `result` events come before it applies). Calling it again
   * (or concurrently, or after iterating the events) resolves with the same results. As
   * Python's `Turn.results()`.
   */
  results(): Promise<ToolResult[]>
  /**
   * Events as they happen (started, progress, finished, detached) and results in submission
   * order. Leaving the loop before the turn is done (`break`, `return`, a throw) cancels and
   * seals the turn: running calls see `ctx.signal` abort (an AbortError whose `cause` says the
   * loop was left), queued calls never start, `submit()` throws from then on, and every
   * submitted call still gets exactly one (`is_error`) result from `results()`. That iterator
   * is done (`next()` resolves `{ done: true }`). One loop follows the turn at a time: while
   * one iterator's `next()` is pending, another iterator's `next()` rejects with
   * `InvalidStateError` (the two would each get only some of the events), as Python's Turn
   * raises while a `__anext__` waits. Only a pending `next()` holds the turn: once it has
   * settled (or the loop has ended, or its iterator was dropped without `return()`), a new
   * loop gets the events left.
   */
  [Symbol.asyncIterator](): AsyncIterator<TurnEvent>
}

/** The concurrent tool executor. */
export declare class ToolExecutor {
  /**
   * An executor without tools (add them with {@link ToolExecutor.tool}). Throws an InvalidArgumentError for
   * an unknown option or an invalid value (a `maxConcurrency` of 0, a timeout under 1 ms, a
   * count of 2^64 or more, a `spillDir` that is no path).
   */
  constructor(options?: ToolExecutorOptions)
  /**
   * Registers a tool; returns the executor (chainable). Throws an InvalidArgumentError for a
   * declaration without a string `name`, an unknown or invalid declaration key (a `schema` that
   * is no object, a `description` that is no string, a `timeoutMs` under 1), a `fn` that is no
   * function, or a name already registered.
   */
  tool<Input = any>(declaration: ToolDeclaration<Input>, fn: ToolFunction<Input>): this
  /** The registered tools' names, in registration order (Python's `tool_names`). */
  readonly toolNames: string[]
  /**
   * Runs a batch: one result per use, in request order; `signal` aborts (rejects with
   * AbortError). A use whose input must cross as JSON and cannot gets its `is_error` result, as
   * in `Turn.submit`, and the others still run. The tools run in the async context of this call (`AsyncLocalStorage` values
   * active here are visible inside them; concurrent runs each see their own). An option other
   * than `signal` is an `InvalidArgumentError`; `signal: null` is none.
   */
  run(toolUses: readonly ToolUse[], options?: { signal?: AbortSignal | null }): Promise<ToolResult[]>
  /**
   * Starts a streaming turn. Aborting `signal` cancels the turn's running and queued calls
   * (their `ctx.signal` fires, with the signal's reason as its cause) and seals it, as leaving
   * its loop early does: each call still gets its `is_error` result, and a later `submit` is an
   * `InvalidStateError`. An already-aborted signal throws an `AbortError`, as `run` rejects. An
   * option other than `signal` is an `InvalidArgumentError`; `signal: null` is none.
   */
  turn(options?: { signal?: AbortSignal | null }): Turn
}

/**
 * A typed event of a provider stream (`type` plus its fields, snake_case as on the wire). The
 * union is closed: every event the decoders produce is one of these members, so narrowing on
 * `type` gives each member's fields their types (`e.type === 'text_delta'` makes `e.text` a
 * string). An event type the decoder does not know arrives as `type: 'unknown'`, with the SSE
 * event type in `event_type`. `index` is the content block index (Anthropic), the choice or tool
 * call index (OpenAI Chat) or the output item index (OpenAI Responses).
 */
export type DecodeEvent =
  /** The stream opened; `message` is the initial snapshot. */
  | { type: 'message_start'; message: Record<string, unknown> }
  /** A content block (or output item) started, as announced (tool inputs empty). */
  | { type: 'block_start'; index: number; block: Record<string, unknown> }
  /** Text appended to a text block. */
  | { type: 'text_delta'; index: number; text: string }
  /** Refusal text appended (OpenAI). */
  | { type: 'refusal_delta'; index: number; refusal: string }
  /** Thinking text appended. */
  | { type: 'thinking_delta'; index: number; thinking: string }
  /** A thinking block's signature (replaces the previous one). */
  | { type: 'signature_delta'; index: number; signature: string }
  /** A citation attached to a text block. */
  | { type: 'citations_delta'; index: number; citation: Record<string, unknown> }
  /** A fragment of a tool call's JSON input, as sent. */
  | { type: 'input_json_delta'; index: number; partial_json: string }
  /** A delta with no typed event of its own (Anthropic's `compaction_delta`, a new type), as sent. */
  | { type: 'unknown_delta'; index: number; delta: Record<string, unknown> }
  /** A content block (or output item) ended. */
  | { type: 'block_stop'; index: number }
  /**
   * A tool call is complete and its input parsed: it may start now. `input` is `{}` when the
   * model sent none, and a string for an OpenAI Responses custom tool call.
   */
  | { type: 'tool_use_ready'; index: number; id: string; name: string; input: unknown }
  /** A tool call ended but its input is not valid JSON: `error` is the parser's complaint. */
  | { type: 'tool_use_invalid'; index: number; id: string; name: string; partial_json: string; error: string }
  /** The output limit (or a streaming refusal) cut a tool call's input off: it must not run. */
  | { type: 'tool_use_truncated'; index: number; id: string; name: string; partial_json: string }
  /**
   * Message-level changes: `delta` is Anthropic's `delta` object (`stop_reason`, ...) or
   * OpenAI's `{ finish_reason }`; `usage` is the cumulative usage as sent, or null.
   */
  | { type: 'message_delta'; delta: Record<string, unknown>; usage: Record<string, unknown> | null }
  /** The stream reached its end marker. */
  | { type: 'message_stop' }
  /** A keep-alive. */
  | { type: 'ping' }
  /** An event of a type the decoder does not know, passed through: its data parsed, or the text. */
  | { type: 'unknown'; event_type: string; data: unknown }

/**
 * Options of {@link StreamDecoder}. Another key is an `InvalidArgumentError` naming it; `null`
 * counts as absent.
 */
export interface StreamDecoderOptions {
  /** The wire format of the stream (default `'anthropic'`, as Python's `StreamDecoder()`). */
  provider?: 'anthropic' | 'openai-chat' | 'openai-responses' | null
  /** Record typed events (default true); false accumulates only (sealing events still come). */
  events?: boolean | null
}

/** Decodes a provider's raw SSE stream: typed events per chunk, the accumulated message. */
export declare class StreamDecoder {
  /** A decoder for one stream. Throws an InvalidArgumentError for an unknown option or provider. */
  constructor(options?: StreamDecoderOptions)
  /** The wire format decoded (Python's `StreamDecoder.provider`). */
  readonly provider: 'anthropic' | 'openai-chat' | 'openai-responses'
  /**
   * Feeds raw bytes split anywhere; returns the typed events they completed. A provider's error
   * event throws the FerroloopError of its class (`code` `'overloaded'`, `'rate_limited'`,
   * `'quota_exceeded'`, `'prompt_too_long'`, `'authentication'`, `'permission'`, `'not_found'`,
   * `'invalid_request'`, `'server'`, else `'provider_error'`; an error whose `code` is an HTTP
   * status, as OpenRouter's `{"error": {"code": 429}}`, is that status's class), as in Python.
   * After `finish()` it throws an InvalidStateError (a new stream needs a new decoder). The
   * chunk is bytes as `SseParser.feed` takes them: a detached ArrayBuffer, or a view of one, is
   * an `InvalidArgumentError`.
   */
  feed(chunk: ArrayBufferView | ArrayBufferLike): DecodeEvent[]
  /** The message so far, in the provider's non-streaming response shape (null before any event). */
  message(): any
  /** Whether the stream reached its end marker. */
  readonly isComplete: boolean
  /**
   * The final message; throws StreamTruncatedError (with `partial`), the provider's error or a
   * ProtocolError. May be called again: it answers the same (the same message, or the same
   * error), as Python's `finish()` and C's `fl_decoder_finish` do; only `feed` after it throws.
   */
  finish(): any
}

/**
 * A tokenizer family for estimates. `claude` (current Claude models) is the default (also for
 * `tokenizer: null`). The options `{ tokenizer }` of `estimateTokens`, `estimateRequest`,
 * `ContextTracker` and `TextEstimator` take no other key: another is an `InvalidArgumentError`
 * naming it.
 * `o200k_base` and `cl100k_base` are accepted aliases of `o200k` and `cl100k` (as in Python).
 */
export type Tokenizer = 'claude' | 'claude-legacy' | 'o200k' | 'cl100k' | 'o200k_base' | 'cl100k_base'

/**
 * Estimated tokens (one pass counting character classes) of a string or UTF-8 bytes (text), an
 * array of messages, or an object: a request body (with `messages`, `system` or `tools`, or an
 * OpenAI Responses body's `input` or `instructions`; `estimateRequest(body).total`), a message (with a `role`) or a content block. As Python's
 * `estimate_tokens`. A lone surrogate counts as U+FFFD, in a string and inside an object (as in
 * `ContextTracker`). Bytes whose ArrayBuffer is detached (transferred) are an
 * `InvalidArgumentError`, not an estimate of 0. A `Set` inside an object counts as an array of
 * its items, as Python counts a set; a `Map` is an `InvalidArgumentError` (in every value sent
 * as JSON: messages, requests, an agent's `extra`).
 */
export declare function estimateTokens(
  input: string | Uint8Array | readonly unknown[] | Record<string, any>,
  options?: { tokenizer?: Tokenizer | null } | null,
): number

/**
 * Exact tokens of `text` for `o200k` or `cl100k`. Throws UnsupportedError for the families
 * without an offline vocabulary (`claude`, `claude-legacy`: "no exact offline tokenizer for
 * ...", in every build), and for the others when the addon was built without the cargo feature
 * `exact` ({@link hasExactCounting} tells).
 */
export declare function countTokens(text: string, tokenizer: Tokenizer): number

/**
 * Whether this build of the addon counts tokens exactly ({@link countTokens}; the cargo feature
 * `exact`, on in `npm run build`). As Python's `has_exact_counting()`.
 */
export declare function hasExactCounting(): boolean

/** Estimated tokens of a request, by part. */
export interface RequestEstimate {
  /** The system prompt. */
  system: number
  /** Tool definitions (with the tool-use preamble). */
  tools: number
  /** Every message (with per-message overheads). */
  messages: number
  /** Per-request overhead. */
  overhead: number
  /** The sum. */
  total: number
}

/**
 * Estimated tokens of a Messages, Chat Completions or Responses request body (`instructions` count
 * as the system part, `input` items as messages).
 */
export declare function estimateRequest(
  body: Record<string, any> & { system?: unknown; tools?: readonly unknown[]; messages?: readonly unknown[]; instructions?: unknown; input?: unknown },
  options?: { tokenizer?: Tokenizer | null } | null,
): RequestEstimate

/** Where a token count stands against a budget. */
export type BudgetState = 'ok' | 'warning' | 'auto_compact' | 'blocking'

/**
 * Options of {@link ContextBudget}: explicit limits or a model name; unset buffers take Claude
 * Code's defaults (the numbers below, shrunk in proportion for a window below about 100,000
 * tokens; a value given is used as given). Another key is an `InvalidArgumentError` naming it;
 * `null` counts as absent. Token counts are whole numbers below 2^64 (a larger one is refused,
 * not clamped).
 */
export interface ContextBudgetOptions {
  /** The model's context window (required unless `model` is given; not beside `model`). */
  window?: number | null
  /** The request's max output tokens (required unless `model` is given; not beside `model`). */
  maxOutputTokens?: number | null
  /**
   * Take the window and max output from the built-in model table (the longest matching name
   * prefix, in any letter case and gateway spelling; a `[1m]` suffix selects a 1,000,000-token
   * window), instead of `window` and `maxOutputTokens`: given beside either, it is an
   * InvalidArgumentError (it was ignored). A model not in the table gets a 200,000-token window
   * and 32,000 max output tokens, as in Python and C: check `window` when it may be unknown.
   */
  model?: string | null
  /** At most this much output is reserved out of the window (20,000). */
  outputReserveCap?: number | null
  /**
   * Auto-compact this far below the effective window (13,000). At least `blockingBuffer` (the
   * default of the one not given counts): a budget that would block before it compacts throws
   * an InvalidArgumentError naming both, as in Python and C.
   */
  autocompactBuffer?: number | null
  /** Warn this far below the auto-compact threshold (20,000). */
  warningBuffer?: number | null
  /** Block this far below the effective window (3,000). */
  blockingBuffer?: number | null
  /**
   * Auto-compact at this percentage of the effective window when that is lower (above 0, at
   * most 100; default: none, the buffer alone decides).
   */
  autocompactPercent?: number | null
}

/**
 * Where a {@link ContextBudget}'s window and output limit come from: both of `window` and
 * `maxOutputTokens`, or a `model` of the built-in table, never neither nor a mix (the runtime
 * refuses those with an InvalidArgumentError).
 */
export type ContextBudgetLimits =
  /** Explicit limits: the context window and the max output tokens, in tokens. */
  | { window: number; maxOutputTokens: number; model?: null }
  /** The limits of a model of the built-in table (200,000 and 32,000 for an unknown one). */
  | { model: string; window?: null; maxOutputTokens?: null }

/** Context thresholds for one model. */
export declare class ContextBudget {
  /**
   * The thresholds for `options`. Throws an InvalidArgumentError for an unknown option, neither
   * or a mix of `model` and `window`/`maxOutputTokens`, a count that is no whole number below
   * 2^64, an `autocompactPercent` outside (0, 100], or buffers that would block before they
   * compact.
   */
  constructor(options: ContextBudgetOptions & ContextBudgetLimits)
  /** The model's context window. */
  readonly window: number
  /** The request's max output tokens. */
  readonly maxOutputTokens: number
  /** The window minus the reserved output. */
  readonly effectiveWindow: number
  /** Compact at or above this many tokens. */
  readonly autocompactThreshold: number
  /** Warn at or above this many tokens. */
  readonly warningThreshold: number
  /** Do not send at or above this many tokens. */
  readonly blockingThreshold: number
  /**
   * Where `tokens` (a whole number; 2^64 and above, as a tracker's saturated count, is past every
   * threshold) stands: `ok`, `warning`, `auto_compact` or `blocking`.
   */
  state(tokens: number): BudgetState
  /** Percentage of the auto-compact threshold still free at `tokens` (as for `state`). */
  percentLeft(tokens: number): number
}

/** How a token count was obtained. */
export interface TokenCount {
  /** Tokens in the context. */
  tokens: number
  /** How they were counted. */
  method: 'exact' | 'usage+estimate' | 'estimate'
}

/** Tracks a conversation's token size: provider usage for the covered prefix, estimates after it. */
export declare class ContextTracker {
  /**
   * An empty tracker (tokenizer `claude` by default). Throws an InvalidArgumentError for an
   * unknown tokenizer or option.
   */
  constructor(options?: { tokenizer?: Tokenizer | null } | null)
  /** The tokenizer family of the estimates. */
  readonly tokenizer: Tokenizer
  /**
   * Sets the system prompt (a string, content blocks, or null for none). Throws an
   * InvalidArgumentError, the tracker unchanged, for anything else (as Python and C refuse it).
   */
  setSystem(system: string | readonly unknown[] | null): void
  /**
   * Sets the tool definitions (an array, or null for none). Throws an InvalidArgumentError, the
   * tracker unchanged, for anything else, such as one tool's object.
   */
  setTools(tools: readonly unknown[] | null): void
  /**
   * Appends a message (a plain object: a message or an OpenAI Responses item). Throws an
   * InvalidArgumentError for anything else (a Map or a class instance included).
   */
  pushMessage(message: Record<string, any>): void
  /**
   * Replaces the whole history (e.g. after compaction); the usage recorded stays if the messages
   * it covered open the new history unchanged. Throws an InvalidArgumentError, the tracker
   * unchanged, for an entry that is no plain object.
   */
  replaceMessages(messages: readonly unknown[]): void
  /**
   * Keeps the first `length` messages (more than there are, `Infinity` included, keeps them all,
   * as in Python). Throws an InvalidArgumentError for a negative or fractional `length`, or NaN.
   */
  truncate(length: number): void
  /** Number of messages tracked. */
  readonly length: number
  /**
   * Records a response's usage (Anthropic or OpenAI field names) covering the first `covered`
   * messages (default: all; more than the messages tracked, `Infinity` included, counts as all
   * of them, as in Python and C). Throws an InvalidArgumentError for a count that is not a
   * non-negative integer or `Infinity` (`NaN` included; `null` is absent) or no count at all.
   */
  recordUsage(usage: Record<string, any>, covered?: number | null): void
  /**
   * The current model's online correction factor (usage / estimate, clamped); settable, e.g.
   * restored from a previous session.
   */
  correction: number
  /**
   * The model whose correction factor applies ('' until set). Setting it selects the model the
   * next requests go to: each model learns its own factor; one selected before gets its factor
   * back, a new one starts from the current factor; usage recorded before stays, but `tokens()`
   * no longer calls it exact. Throws an InvalidArgumentError for anything but a string.
   */
  model: string
  /** The correction factor `model` learned, or null if it was never selected. */
  correctionFor(model: string): number | null
  /** The context's size now. */
  tokens(): TokenCount
  /** Bytes run through the estimator so far (a work counter). */
  readonly bytesEstimated: number
}

/**
 * The token estimate of a text fed in pieces (a file read in chunks, a child process's output):
 * what {@link estimateTokens} gives for the whole text, in memory bounded by its longest line (a
 * line over 1 MiB is counted in 1 MiB pieces, a token or so apart per piece).
 */
export declare class TextEstimator {
  /**
   * An estimator with nothing fed (tokenizer `claude` by default). Throws an
   * InvalidArgumentError for an unknown tokenizer or option.
   */
  constructor(options?: { tokenizer?: Tokenizer | null } | null)
  /**
   * Adds the next piece: a string (it may end between the halves of a surrogate pair), or UTF-8
   * bytes (a character may be split between pieces). Bytes whose ArrayBuffer is detached are
   * an `InvalidArgumentError`.
   */
  feed(piece: string | Uint8Array): void
  /** The estimate of the text fed so far (0 for none). */
  estimate(): number
}

/** The provider API a {@link Client} speaks. */
export type Provider = 'anthropic' | 'openai-chat' | 'openai-responses'

/**
 * Watchdog timeouts of a {@link Client}, in milliseconds. Each must be above 0: 0 would fail or
 * race every request, and there is no "no timeout" (a very long one is that); 0 is an
 * `InvalidArgumentError`, as Python's `ValueError`.
 */
export interface ClientTimeouts {
  /** The connection: TCP, a proxy's CONNECT and the TLS handshake (default 30,000). */
  connectMs?: number | null
  /** From sending the request to the response headers (default 600,000). */
  firstByteMs?: number | null
  /** From the headers to the first event (default 90,000). */
  firstEventMs?: number | null
  /** Between two events (default 90,000). */
  idleMs?: number | null
  /** A gap this long is reported once as a `stalled` event (default 30,000). */
  stallNoticeMs?: number | null
  /** The whole request, retries included (default 600,000). */
  totalMs?: number | null
}

/**
 * Options of {@link Client}. A key not listed here (`timeoutMs` for `timeouts.totalMs`, say),
 * in these options or in `timeouts`, is an `InvalidArgumentError` naming it, as Python refuses
 * an unknown keyword; `null` counts as absent.
 */
export interface ClientOptions {
  /** Default `anthropic`. */
  provider?: Provider | null
  /** Default: `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` (unless `fromEnv: false`). */
  apiKey?: string | null
  /** Default: `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` (unless `fromEnv: false`), else the public endpoint. */
  baseUrl?: string | null
  /**
   * Retries after the first attempt (default 10; 0 disables retries), on 408/409/429/5xx/529
   * and connection failures before the first event, and on a provider error of a transient class
   * (rate limited but not `insufficient_quota`, overloaded, server) that a 200 carries before
   * any event was delivered: as its first event (Anthropic's `error` event, OpenRouter's
   * `{"error": {"code": 502}}`, a Responses `error` or `response.failed`; its `retry` event has
   * the status such a code names, else `null`) or as a JSON body (for `create` too). Keep-alive
   * comments do not count as delivered; after an event the error ends the stream truncated. A `retry-after` up to 60 s is honoured; a
   * longer one is not waited for (the backoff applies instead). With the defaults, an endpoint
   * that keeps failing (a refused connection, say) is retried for about 80 s on average (at most
   * 160 s of waits) before the error; no retry is made past `timeouts.totalMs`.
   */
  maxRetries?: number | null
  /** The first backoff ceiling in milliseconds (default 500, doubling per retry, full jitter). */
  retryBaseDelayMs?: number | null
  /** The largest backoff ceiling in milliseconds (default 32,000); a base above it is capped to it. */
  retryMaxDelayMs?: number | null
  /** Watchdog timeouts: a plain object (a Map or an array is an InvalidArgumentError). */
  timeouts?: ClientTimeouts | null
  /** Extra headers sent with every request. */
  headers?: Record<string, string> | null
  /** The `anthropic-version` header (default `2023-06-01`). */
  anthropicVersion?: string | null
  /** `anthropic-beta` header values. */
  anthropicBeta?: readonly string[] | null
  /** Read `apiKey`, `baseUrl` and proxies from the environment when not given (default true). */
  fromEnv?: boolean | null
}

/** Per-request options (another key is an `InvalidArgumentError`; `null` counts as absent). */
export interface RequestOptions {
  /** Aborts the request at once (the Promise rejects / the iteration throws an AbortError). */
  signal?: AbortSignal | null
}

/** Measurements of a completed request. */
export interface RequestMetrics {
  /** The provider's request id, when it sent one. */
  requestId: string | null
  /** Attempts made (1 without retries). */
  attempts: number
  /** Retries made. */
  retries: number
  /** The HTTP version of the last attempt (`HTTP/1.1`, `HTTP/2.0`). */
  httpVersion: string | null
  /** From the start of the request to the headers of the response used. */
  timeToHeadersMs: number | null
  /** From the start of the request to its first event. */
  timeToFirstEventMs: number | null
  /** From the start of the request to its first content delta. */
  timeToFirstTokenMs: number | null
  /** The whole request, retries included. */
  totalMs: number | null
  /** Response body bytes received, all attempts together. */
  bytesReceived: number
  /** Events received. */
  events: number
  /** The provider's final usage object, when it sent one. */
  usage: Record<string, unknown> | null
}

/**
 * What a stream yields: typed decoder events, retries and stall notices. A retry's fields mean
 * what the agent's `retry` event's do (and Python's): `attempt` is the attempt about to be made
 * (2 for the first retry); `status` is `null` without one (a connection error, a timeout, an
 * error event first in a 200); `code` is the failure's class as the errors name it
 * (`'overloaded'`, `'rate_limited'`, `'server'`, `'connection'`, `'timeout'`, ...), which says
 * why the client waits when there is no status; `overloaded` is true for a 529 and for an
 * overload without one (an `overloaded_error` event first in a 200, OpenAI's
 * `server_is_overloaded`); `reason` is the failure's text.
 */
export type StreamEvent =
  | DecodeEvent
  /** The client retries the request after `waitMs` milliseconds (the fields as above). */
  | { type: 'retry'; attempt: number; status: number | null; code: string; overloaded: boolean; waitMs: number; reason: string }
  /**
   * The stream went quiet for `elapsedMs` milliseconds (reported once per gap, after
   * `timeouts.stallNoticeMs`).
   */
  | { type: 'stalled'; elapsedMs: number }

/** A streaming response: `for await` its events, then (or instead) `await message()`. */
export declare class MessageStream implements AsyncIterable<StreamEvent> {
  private constructor()
  /**
   * The events as they arrive; leaving the loop early cancels the request. Iterate once: a
   * second iterator's `next()` rejects with `InvalidStateError`. Events `message()` read
   * before the loop did wait for it: the loop gets every one.
   */
  [Symbol.asyncIterator](): AsyncIterator<StreamEvent>
  /**
   * The final message (provider shape); rejects with the request's FerroloopError. Reads the
   * rest of the stream itself, also while a loop iterates it (one whose iterator was dropped
   * between two `next()` calls, or that awaits this in its body): it settles without the loop
   * reading on, and the loop still gets every event. Called before any loop, the stream counts
   * as iterated.
   */
  message(): Promise<any>
  /** Alias of {@link message}. */
  finalMessage(): Promise<any>
  /** Cancels the request. */
  abort(): void
  /**
   * Measurements, once the request ended: with its message, or with an error (attempts,
   * retries, bytes and timings up to the failure). Null before, and after an abort.
   */
  readonly metrics: RequestMetrics | null
  /** The final message once completed, else null. */
  readonly completedMessage: any
}

/** A streaming HTTP client (retries with backoff, watchdogs, decoding) for one provider endpoint. */
export declare class Client {
  /**
   * A client for one endpoint (no request is made yet). Throws an InvalidArgumentError for an
   * unknown option or provider, a value out of range (a timeout of 0), or a base URL, proxy or
   * header that cannot be used (a base URL ending with the endpoint path included).
   */
  constructor(options?: ClientOptions)
  /** The provider API spoken. */
  readonly provider: Provider
  /** The endpoint's base URL. */
  readonly baseUrl: string
  /**
   * Starts a streaming request (`stream: true` is set). A number JSON has no form for (NaN,
   * ±Infinity) anywhere in the request is an InvalidArgumentError naming its key, not sent as
   * `null`; a `Set` is sent as an array (as Python sends a set), a `Map` is an
   * InvalidArgumentError (both were sent as `{}`).
   */
  stream(request: Record<string, any>, options?: RequestOptions): MessageStream
  /**
   * A non-streaming request (`stream: false` is sent, whatever `request` says): the provider's
   * JSON response. Rejects with the request's FerroloopError (as `stream`'s `message()`), an
   * AbortError when `signal` aborts, and with an InvalidArgumentError for a request that cannot
   * be sent as JSON, as `stream` throws.
   */
  create(request: Record<string, any>, options?: RequestOptions): Promise<any>
}

/** A built-in native tool, confined to the agent's workspace. */
export type BuiltinToolName = 'read' | 'write' | 'edit' | 'glob' | 'grep' | 'bash'

/**
 * Options of {@link Agent}. A key not listed here is an `InvalidArgumentError` naming it, as
 * Python refuses an unknown keyword; `null` counts as absent. Token counts (`maxTokens`,
 * `tokenBudget`, `escalatedMaxTokens`) are whole numbers below 2^64; a larger one is refused,
 * not clamped.
 */
export interface AgentOptions {
  /**
   * The model name sent in requests. A configuration every run would refuse (the core's check:
   * an empty or blank `model` or `fallbackModel`, `maxTokens` of 0 or not above
   * `extra.thinking.budget_tokens`, `extra` holding `messages` or `model`, a `tool_choice`
   * forcing tool use with thinking on or naming no tool, a tool name the providers refuse — not
   * 1 to 64 ASCII letters, digits, `_` or `-` — or given twice, ...) is an `InvalidArgumentError` from `new Agent`
   * (`invalid agent configuration: ...`, as Python's `ValueError` and C's `fl_agent_new`).
   */
  model: string
  /** The system prompt. */
  system?: string | null
  /** JS tools (a ToolExecutor) and/or built-in tool names. */
  tools?: ToolExecutor | BuiltinToolName | ReadonlyArray<ToolExecutor | BuiltinToolName> | null
  /**
   * The directory the built-in tools are confined to (default: the current directory): a path,
   * or a `file:` URL (`new URL('./sandbox/', import.meta.url)`), as Node's fs and Python's
   * `pathlib.Path` take.
   */
  workspace?: string | URL | null
  /**
   * Turns at most (default 50; 0: none, the run stops at once with `max_turns`). A request sent
   * again for the same turn (a fallback model, a retried truncated stream, a raised `maxTokens`,
   * a refused field, a compaction after a refusal as too long) counts once.
   */
  maxTurns?: number | null
  /** `max_tokens` per request (default 8,192). */
  maxTokens?: number | null
  /**
   * Input + output tokens over the run, at most (0: no model call, the run stops with `budget`;
   * a last answer that ends the run itself stops with its own reason, whatever it spent).
   */
  tokenBudget?: number | null
  /** Continuations after a `max_tokens` stop in text (default 3). */
  maxContinuations?: number | null
  /**
   * The output limit a turn cut by `max_tokens` is asked again with, once, before it is
   * continued (default 64,000; 0: never): the cut response is discarded (its calls not run, its
   * usage counted) and a `max_tokens_raised` event says so. Capped by the model's output ceiling,
   * the context window left and what the token budget leaves; not raised for a model the built-in table does not know, nor
   * when `extra` sets the output limit. Python's `escalated_max_tokens`.
   */
  escalatedMaxTokens?: number | null
  /**
   * Recent tool results microcompact keeps (default 5; any count below 2^64, as in Python and
   * C); the last turn's, not yet read by the model, are always kept.
   */
  keepRecentToolResults?: number | null
  /**
   * The model to switch to when the model is overloaded (a call failing with HTTP 529 or an
   * `overloaded_error` after the client's retries, or seeing `fallbackAfter529Retries` consecutive
   * 529 retries, a retried `overloaded_error` event that came before anything was delivered
   * counting as one): the turn is retried once with it, and it answers for the rest of the run (a
   * `model_fallback` event). The built-in summariser's call counts and falls back alike (its
   * summary is then asked of the fallback). Python's `fallback_model`. Default: no fallback (an
   * overload announced mid-stream, which the client cannot retry, then has the turn asked
   * again once of the same model).
   */
  fallbackModel?: string | null
  /**
   * Consecutive overload retries (529s, and overload events without one) within one call, a
   * turn's or the built-in summariser's, after which the run falls back (default 3; 0: only
   * when the call fails). Only with `fallbackModel`.
   */
  fallbackAfter529Retries?: number | null
  /** Place `cache_control` breakpoints (default true). */
  promptCaching?: boolean | null
  /** Tokenizer family for estimates. */
  tokenizer?: Tokenizer | null
  /**
   * Extra fields merged into every request (temperature, thinking, metadata, ...), except
   * `tools`: an array added to the tools' definitions (tools the provider runs itself, such as
   * Anthropic's `{ type: 'web_search_20250305', name: 'web_search' }`). A number JSON has no
   * form for (NaN, ±Infinity) is an InvalidArgumentError naming its key, not sent as `null`.
   */
  extra?: Record<string, any> | null
}

/** Why a run stopped. */
export type StopReason = 'end_turn' | 'stop_sequence' | 'refusal' | 'max_tokens' | 'max_turns' | 'budget' | 'aborted' | 'prompt_too_long' | 'error'

/** The stable codes of a run's stop event (`errorCode`); a string not listed may come from a future version. */
export type AgentStopErrorCode =
  | 'authentication' | 'permission' | 'not_found' | 'rate_limited' | 'quota_exceeded' | 'invalid_request'
  | 'server' | 'connection' | 'timeout' | 'protocol' | 'overloaded'
  | 'stream_truncated' | 'prompt_too_long' | 'invalid_history' | 'invalid_configuration'
  | 'invalid_tool_definition' | 'internal' | 'hook_failed' | 'model_error' | 'token_budget' | 'cost_budget'
  | 'max_tokens_no_progress'
  | (string & {})

/** The last event of a run. */
export interface AgentStopEvent {
  /** Always `'stop'`. */
  type: 'stop'
  /** Why the run stopped. */
  reason: StopReason
  /** The error (reason `error`), or a note. */
  error: string | null
  /**
   * Why the run failed, as a stable code (Python's `error_code`), set exactly when `error` is
   * (`null` otherwise): the client error's code (`'authentication'`, `'permission'`,
   * `'not_found'`, `'rate_limited'`, `'quota_exceeded'`, `'invalid_request'`, `'server'`,
   * `'connection'`, `'timeout'`, `'protocol'`),
   * `'overloaded'`, `'stream_truncated'`, or the loop's: `'invalid_history'` (a conversation
   * refused before any request), `'invalid_configuration'`, `'invalid_tool_definition'`,
   * `'internal'`, `'hook_failed'`, `'model_error'`; `'prompt_too_long'` for reason
   * `prompt_too_long`, `'token_budget'` or `'cost_budget'` for reason `budget`;
   * `'max_tokens_no_progress'` for reason `max_tokens` when a response cut with nothing of it
   * kept would be asked for again with the same request (a `max_tokens` stop after the
   * continuations ran out has none).
   */
  errorCode: AgentStopErrorCode | null
  /**
   * The HTTP status of the failed model call the run stopped on (Python's `status`): set only
   * for a stop caused by a failed call — reason `error` with a model's code, or
   * `prompt_too_long` after the provider refused the prompt (after a switch to the fallback
   * model, the fallback's call) — that had one; `null` for every other stop and for a failure
   * without a status (a lost connection, a timeout, a stream cut without an error event).
   */
  status: number | null
  /**
   * The provider's request id of that failed call (Python's `request_id`), to quote to its
   * support: set on the same stops as `status`, when the response's headers arrived; `null`
   * otherwise.
   */
  requestId: string | null
  /**
   * The wait in milliseconds the provider asked for (`retry-after`) when a rate limit's 429,
   * an overload's 529 or a server error's 5xx such as a 503 (`errorCode` `'rate_limited'`,
   * `'overloaded'`, `'server'`) outlasted the client's retries: when to schedule a new run
   * (Python's `retry_after`, in seconds). `null` otherwise: the client keeps no wait for other
   * statuses.
   */
  retryAfterMs: number | null
  /** The conversation, valid for the API (every tool_use answered). */
  messages: any[]
  /** Turns taken: model calls, but a turn asked again (a broken stream, a fallback, a raised output limit, a refused field, a compaction after a refusal as too long) counts once, and summary calls not at all. */
  turns: number
  /**
   * Tool calls handed to the tools: the number of `tool_finished` events (one per call,
   * whatever its status), calls started early in a response then discarded (a fallback, a
   * raised output limit, a broken stream, an abort) included. A call never run (input not valid JSON, in
   * a response that did not stop for tool use) has no events and does not count.
   */
  toolCalls: number
  /** Input tokens over the run (provider usage, the summariser's calls included): the sum of the `usage` events'. */
  inputTokens: number
  /** Output tokens over the run (provider usage, the summariser's calls included): the sum of the `usage` events'. */
  outputTokens: number
}

/** Events of an agent run, as they happen; the last is `stop`. */
export type AgentEvent =
  /**
   * A model call starts: `turn` is 1-based (a turn asked again repeats its number),
   * `estimatedInputTokens` the request's estimated input, in tokens.
   */
  | { type: 'turn_start'; turn: number; estimatedInputTokens: number }
  /** Text streamed by the model. */
  | { type: 'text_delta'; text: string }
  /** Thinking streamed by the model. */
  | { type: 'thinking_delta'; thinking: string }
  /**
   * A tool call started running. A call that never starts has only its `tool_finished`: an
   * unknown tool or input its schema refuses (`'rejected'`), a hook's refusal (`'denied'`), a
   * cancellation or discard before it was admitted (`'skipped'`).
   */
  | { type: 'tool_started'; toolUseId: string; name: string; input: unknown }
  /** A tool reported progress: `data` is what it passed to `ctx.progress`. */
  | { type: 'tool_progress'; toolUseId: string; data: unknown }
  /**
   * A tool call ended: one per call handed to the tools, whether it started or not. `status`
   * says how, as the executor's `finished` turn event's does; `durationMs` is how long it ran,
   * in milliseconds.
   */
  | { type: 'tool_finished'; toolUseId: string; name: string; isError: boolean; status: CallStatus; durationMs: number }
  /**
   * The model call is retried by the client. `call` says which: a turn's (`'turn'`) or the
   * built-in summariser's (`'compaction'`, before the compaction's `context` event), as the
   * `usage` event's does. `attempt` is the one about to be made; `status`
   * is `null` without one (a connection error, a timeout, an error event first in a 200);
   * `code` is the failure's class as the client's errors name it (`'overloaded'`,
   * `'rate_limited'`, `'server'`, `'connection'`, `'timeout'`, ...), which says why the loop
   * waits when there is no status (always set: the model of a Node agent is its Client, whose
   * retries all have one, as the client stream's `retry` events do); `overloaded` is true for
   * a 529 and for an overload without one (an `overloaded_error` event first in a 200).
   */
  | { type: 'retry'; call: 'turn' | 'compaction'; attempt: number; status: number | null; code: string; overloaded: boolean; waitMs: number }
  /**
   * The run switched to `fallbackModel`. `reason`: `'overloaded'` (the call failed after the
   * client's retries) or `'repeated_529'` (`fallbackAfter529Retries` consecutive overloads: 529s
   * and overload events without a 529 alike); `error`: what the provider said, or for
   * `'repeated_529'` how many overloads were seen and which ("3 consecutive HTTP 529
   * responses", "3 consecutive overloaded errors (without an HTTP 529: ...)", or both counted).
   */
  | { type: 'model_fallback'; call: 'turn' | 'compaction'; from: string; to: string; reason: 'overloaded' | 'repeated_529'; error: string }
  /**
   * A response cut by `max_tokens` is discarded and turn `turn` asked again with a higher
   * output limit (`from` → `to`, in tokens; see `escalatedMaxTokens`).
   */
  | { type: 'max_tokens_raised'; turn: number; from: number; to: number }
  /** Microcompact cleared `cleared` old tool results; `tokensBefore` is the estimate before, in tokens. */
  | { type: 'context'; action: 'microcompact'; cleared: number; tokensBefore: number }
  /**
   * The history was replaced by a summary (`messagesBefore` → `messagesAfter` messages);
   * `trigger` is `'auto'` (the auto-compact threshold) or `'reactive'` (the provider refused
   * the prompt as too long).
   */
  | { type: 'context'; action: 'compaction'; messagesBefore: number; messagesAfter: number; trigger: 'auto' | 'reactive' }
  /**
   * The prompt cache was read much less than on the previous turn's call; `changed` names the
   * prefix components whose bytes changed (`'system'`, `'tools'`, `'messages'`). Not reported
   * after the loop's own compaction or microcompact, nor after a switch to the fallback model
   * (whose cache is its own).
   */
  | { type: 'cache_break'; previous: number; current: number; changed: Array<'system' | 'tools' | 'messages'> }
  /**
   * One per billed model call. `call` says which: `'turn'` (a turn's call, before its
   * `turn_end`; also one that broke off, failed or was aborted after the provider reported
   * usage, and one that broke off or was aborted after it delivered something but before it
   * reported usage, as OpenAI's streams report it only at their end: its `usage` is `null`) or `'compaction'` (a call of the built-in summariser, before the compaction's
   * `context` event; `turn` is the turn it is made for, the next `turn_start`'s). The events'
   * reported usage adds up to the stop event's `inputTokens` (input + cache creation + cache
   * read) and `outputTokens`; `usage` is `null` for a call reported without usage (a Chat server
   * that does not report it), which only the budgets count, by its estimate.
   */
  | { type: 'usage'; turn: number; call: 'turn' | 'compaction'; usage: Record<string, unknown> | null; estimatedInputTokens: number; timeToFirstTokenMs: number | null }
  /** A model call ended: `stopReason` is the provider's, `null` for a call that failed or was cancelled. */
  | { type: 'turn_end'; turn: number; stopReason: string | null }
  | AgentStopEvent

/**
 * A tool definition as an {@link Agent} sends it to the model: one of its own tools (its JS and
 * built-in tools: `name`, `input_schema`, a `description` when the tool has one, no `type`), or
 * a tool of `extra.tools` (one the provider runs itself, such as Anthropic's
 * `{ type: 'web_search_20250305', name: 'web_search' }`), as given. `d.type === undefined`
 * tells them apart.
 */
export type ToolDefinition =
  /** One of the agent's own tools (JS or built-in). */
  | { type?: undefined; name: string; description?: string; input_schema: Record<string, unknown> }
  /** A provider tool of `extra.tools`, as given. */
  | { type: string; [key: string]: unknown }

/** A run in progress. */
export declare class AgentRun implements AsyncIterable<AgentEvent> {
  private constructor()
  /**
   * The events as they happen; leaving the loop early cancels the run (the loop is left once
   * the run's tools have stopped, or outlived the cleanup grace). Iterate once: a second
   * iterator's `next()` rejects with `InvalidStateError` (two loops would each get only some
   * events); several `next()` calls at once on the one iterator are answered in order. Events
   * `result()` read before the loop did wait for it: the loop gets every one.
   */
  [Symbol.asyncIterator](): AsyncIterator<AgentEvent>
  /**
   * The stop event (after an iteration left early, which cancels the run, the cancelled run's
   * stop). Reads the rest of the run itself, also while a loop iterates it (one whose iterator
   * was dropped between two `next()` calls, or that awaits this in its body): it settles
   * without the loop reading on, and the loop still gets every event. Called before any loop,
   * the run counts as iterated.
   */
  result(): Promise<AgentStopEvent>
  /** Cancels the run: tools see ctx.signal abort; the run still ends with `stop` (reason `aborted`). */
  abort(): void
}

/** The agent loop over a Client: model call, decode, tools (safe ones eagerly), results, repeat. */
export declare class Agent {
  /**
   * An agent over `client`. Throws an InvalidArgumentError when `client` is no {@link Client},
   * for an unknown or invalid option, and for a configuration every run would refuse
   * (`invalid agent configuration: ...`, see {@link AgentOptions.model}).
   */
  constructor(client: Client, options: AgentOptions)
  /** The names of the tools the agent runs (its JS and built-in tools), sorted (Python's `tool_names`). */
  readonly toolNames: string[]
  /**
   * The tool definitions sent to the model: the agent's own tools sorted by name, then the
   * provider's tools of `extra.tools` as given.
   */
  toolDefinitions(): ToolDefinition[]
  /**
   * Runs the loop for a prompt, or continues `messages` (then `prompt` may be null). An invalid
   * conversation (not user/assistant messages ending with the user's, an empty message or text
   * block, or tool calls and results that do not pair up, results first in their message) makes no request: the run's only event is a `stop` with reason
   * `'error'` and an `error` saying what is wrong. The run's JS tools run in the async context
   * of this call (`AsyncLocalStorage` values active here are visible inside them). An option
   * other than `signal` and `messages` is an `InvalidArgumentError`.
   */
  run(prompt: string | readonly unknown[] | null, options?: { signal?: AbortSignal | null; messages?: readonly unknown[] | null }): AgentRun
}
