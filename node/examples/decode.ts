// Decode a recorded Anthropic stream with types (checked by `tsc --noEmit`).
import { readFileSync } from 'node:fs'
import { StreamDecoder, StreamTruncatedError, type DecodeEvent, type DecodeErrorDetail } from 'ferroloop'

const decoder = new StreamDecoder({ provider: 'anthropic' })
const bytes = readFileSync('../tests/fixtures/anthropic/tool_use_response.sse')
for (let i = 0; i < bytes.length; i += 1460) {
  for (const event of decoder.feed(bytes.subarray(i, i + 1460))) {
    const e: DecodeEvent = event
    if (e.type === 'tool_use_ready') console.log('run tool', e.name, e.input)
  }
}
try {
  console.log(decoder.finish())
} catch (err) {
  if (err instanceof StreamTruncatedError) console.log((err as StreamTruncatedError & DecodeErrorDetail).partial)
}
