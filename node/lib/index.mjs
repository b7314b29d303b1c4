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
  ProviderError,
  toFerroloopError,
  SseParser,
  StreamDecoder,
  estimateTokens,
  estimateRequest,
  ContextBudget,
  ContextTracker,
  ToolExecutor,
  Turn,
  _debugPanic,
} = ferroloop
export default ferroloop
