// ESM entry point: the same objects as the CommonJS entry (one native addon instance).
import ferroloop from './index.js'

export const {
  FerroloopError,
  InvalidArgumentError,
  InternalError,
  TimeoutError,
  StreamTruncatedError,
  ProtocolError,
  RateLimitedError,
  OverloadedError,
  PromptTooLongError,
  AbortError,
  toFerroloopError,
  SseParser,
  ToolExecutor,
  Turn,
  _debugPanic,
} = ferroloop
export default ferroloop
