// Parse a recorded Anthropic stream with ferroloop in 1460-byte chunks (run after `npm run build`).
import { readFileSync } from 'node:fs'
import { SseParser, FerroloopError } from 'ferroloop'

const parser = new SseParser()
const bytes = readFileSync(new URL('../../tests/fixtures/anthropic/tool_use_response.sse', import.meta.url))
for (let i = 0; i < bytes.length; i += 1460) {
  for (const { event, data, id } of parser.feed(bytes.subarray(i, i + 1460))) {
    console.log(event, data.length, id)
  }
}
parser.finish()

try {
  parser.feed('not bytes')
} catch (err) {
  console.log(err instanceof FerroloopError, err.code) // true invalid_argument
}
