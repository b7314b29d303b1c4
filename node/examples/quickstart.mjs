// Decode a recorded Anthropic stream and run its tool calls as soon as they are sealed
// (run after `npm run build`: node examples/quickstart.mjs). Shown in the README.
import { readFileSync } from 'node:fs'
import { StreamDecoder, ToolExecutor } from 'ferroloop'

// Decode a recorded Anthropic stream; tool calls are sealed as soon as their block ends.
const decoder = new StreamDecoder({ provider: 'anthropic' })
const executor = new ToolExecutor({ maxConcurrency: 10 })
executor.tool({ name: 'get_weather', concurrencySafe: true, timeoutMs: 5000 }, async (input, ctx) => {
  ctx.signal.throwIfAborted() // aborted on timeout, cancellation or run({ signal }) abort
  return `Sunny in ${input.location}`
})
const turn = executor.turn()
const bytes = readFileSync(new URL('../../tests/fixtures/anthropic/tool_use_response.sse', import.meta.url))
for (let i = 0; i < bytes.length; i += 1460) {
  for (const event of decoder.feed(bytes.subarray(i, i + 1460))) {
    if (event.type === 'tool_use_ready') turn.submit({ id: event.id, name: event.name, input: event.input })
  }
}
turn.seal()
const message = decoder.finish()
console.log(message.stop_reason, message.content.length)
console.log(await turn.results())
