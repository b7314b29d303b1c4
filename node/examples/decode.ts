// Decode a recorded Anthropic stream with types (checked by `tsc --noEmit`).
import { readFileSync } from 'node:fs'
import { StreamDecoder, StreamTruncatedError, type DecodeEvent, type DecodeErrorDetail } from 'ferroloop'

// Narrowing on `type` gives each event its own fields' types.
function describe(e: DecodeEvent): string {
  switch (e.type) {
    case 'text_delta':
      return `text ${e.index}: ${e.text.length} chars`
    case 'input_json_delta':
      return `input ${e.index}: ${e.partial_json}`
    case 'tool_use_ready':
      return `run ${e.name} (${e.id})`
    case 'tool_use_invalid':
      return `bad input for ${e.name}: ${e.error}`
    case 'message_delta':
      return `stop: ${String(e.delta.stop_reason)}, usage: ${e.usage === null ? 'none' : JSON.stringify(e.usage)}`
    case 'unknown':
      return `unknown event ${e.event_type}`
    default:
      return e.type
  }
}

const decoder = new StreamDecoder({ provider: 'anthropic' })
const bytes = readFileSync('../tests/fixtures/anthropic/tool_use_response.sse')
for (let i = 0; i < bytes.length; i += 1460) {
  for (const event of decoder.feed(bytes.subarray(i, i + 1460))) {
    const e: DecodeEvent = event
    console.log(describe(e))
  }
}
try {
  console.log(decoder.finish())
} catch (err) {
  if (err instanceof StreamTruncatedError) console.log((err as StreamTruncatedError & DecodeErrorDetail).partial)
}
