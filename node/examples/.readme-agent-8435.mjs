import { Agent, Client, ToolExecutor } from 'ferroloop'

const client = new Client({ apiKey: process.env.ANTHROPIC_API_KEY, maxRetries: 4, timeouts: { idleMs: 60_000 } })
const controller = new AbortController()
const stream = client.stream({ model: 'claude-sonnet-4-5', max_tokens: 256, messages: [{ role: 'user', content: 'Hi' }] },
                             { signal: controller.signal })
for await (const event of stream) if (event.type === 'text_delta') process.stdout.write(event.text)
const message = await stream.message() // or only this; StreamTruncatedError carries err.partial

const tools = new ToolExecutor().tool({ name: 'weather', concurrencySafe: true }, async (input, ctx) => {
  ctx.progress({ city: input.city }) // a tool_progress event
  return `Sunny in ${input.city}`
})
const agent = new Agent(client, { model: 'claude-sonnet-4-5', tools: [tools, 'read', 'grep'], maxTurns: 8 })
for await (const event of agent.run('Weather in Paris?', { signal: controller.signal })) {
  if (event.type === 'stop') console.log(event.reason, event.messages.length)
}
