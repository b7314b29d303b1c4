// Compiled by types-errors.test.js (`tsc --strict`): the detail fields the README promises on
// errors (`err.partial` of a StreamTruncatedError, `retryAfterMs` of a RateLimitedError, a
// TimeoutError's `which` and `elapsedMs`, ...) are declared on their classes, so narrowing with
// `instanceof` reaches them without a cast to ClientErrorDetail or DecodeErrorDetail.
import {
  AuthenticationError,
  Client,
  InvalidRequestError,
  OverloadedError,
  PromptTooLongError,
  ProtocolError,
  ProviderError,
  RateLimitedError,
  ServerError,
  StreamDecoder,
  StreamTruncatedError,
  TimeoutError,
  type DecodeEvent,
  type FerroloopErrorCode,
} from 'ferroloop'

export async function handle(client: Client, decoder: StreamDecoder, chunk: Uint8Array): Promise<void> {
  try {
    await client.stream({ model: 'm', max_tokens: 8, messages: [] }).message()
  } catch (err) {
    if (err instanceof StreamTruncatedError) {
      const partial: unknown = err.partial
      const reason: FerroloopErrorCode | undefined = err.reason
      const events: DecodeEvent[] | undefined = err.events
      console.log(partial, reason, events, err.cause)
    }
    if (err instanceof RateLimitedError || err instanceof OverloadedError || err instanceof ServerError) {
      const wait: number | undefined = err.retryAfterMs
      const type: string | undefined = err.errorType
      console.log(wait, type)
    }
    if (err instanceof TimeoutError) {
      const which: 'connect' | 'first byte' | 'first event' | 'idle' | 'total' | undefined = err.which
      const elapsed: number | undefined = err.elapsedMs
      console.log(which, elapsed)
    }
    if (err instanceof PromptTooLongError) {
      const tokens: number | null | undefined = err.tokens
      const limit: number | null | undefined = err.limit
      console.log(tokens, limit)
    }
    if (err instanceof ProtocolError) {
      const limit: number | null | undefined = err.limit
      console.log(limit)
    }
    if (err instanceof AuthenticationError || err instanceof InvalidRequestError) console.log(err.errorType)
  }
  try {
    decoder.feed(chunk)
  } catch (err) {
    if (err instanceof ProviderError || err instanceof OverloadedError) {
      console.log(err.errorType, err.raw, err.partial, err.events?.length)
    }
    if (err instanceof ProtocolError) console.log(err.partial, err.events, err.errorType)
  }
}
