// The client and the agent loop with types (checked by `tsc --noEmit`).
import {
  Agent,
  Client,
  FerroloopError,
  StreamTruncatedError,
  ToolExecutor,
  countTokens,
  type AgentEvent,
  type StreamEvent,
} from 'ferroloop'

const client = new Client({
  provider: 'anthropic',
  apiKey: process.env.ANTHROPIC_API_KEY,
  maxRetries: 4,
  timeouts: { idleMs: 60_000, totalMs: 300_000 },
})

async function streamOnce(signal: AbortSignal): Promise<void> {
  const stream = client.stream(
    { model: 'claude-sonnet-4-5', max_tokens: 256, messages: [{ role: 'user', content: 'Hello' }] },
    { signal },
  )
  try {
    for await (const event of stream as AsyncIterable<StreamEvent>) {
      if (event.type === 'text_delta') process.stdout.write(String(event.text))
      if (event.type === 'retry') console.error(`retry ${event.attempt} after ${event.waitMs} ms`)
    }
    const message = await stream.message()
    console.log(message.stop_reason, stream.metrics?.timeToFirstTokenMs)
  } catch (err) {
    if (err instanceof StreamTruncatedError) console.error('truncated; partial:', err.code, err.requestId)
    else if (err instanceof FerroloopError) console.error(err.code, err.status, err.requestId)
    else throw err
  }
}

interface WeatherInput {
  city: string
}

const tools = new ToolExecutor({ maxConcurrency: 4 }).tool<WeatherInput>(
  { name: 'weather', concurrencySafe: true, timeoutMs: 10_000, schema: { type: 'object', properties: { city: { type: 'string' } } } },
  async (input, ctx) => {
    ctx.progress({ looking_up: input.city })
    ctx.signal.throwIfAborted()
    return `Sunny in ${input.city}`
  },
)

async function runAgent(signal: AbortSignal): Promise<void> {
  const agent = new Agent(client, {
    model: 'claude-sonnet-4-5',
    system: 'Answer briefly.',
    tools: [tools, 'read', 'grep'],
    workspace: process.cwd(),
    maxTurns: 8,
  })
  for await (const event of agent.run('What is the weather in Paris?', { signal })) {
    const e: AgentEvent = event
    switch (e.type) {
      case 'text_delta':
        process.stdout.write(e.text)
        break
      case 'tool_finished':
        console.log(`${e.name}: ${e.status} in ${e.durationMs.toFixed(1)} ms`)
        break
      case 'stop':
        console.log(`stopped: ${e.reason} after ${e.turns} turns, ${e.messages.length} messages`)
        break
    }
  }
  const stop = await new Agent(client, { model: 'claude-sonnet-4-5' }).run('Hi').result()
  console.log(stop.reason, stop.inputTokens + stop.outputTokens, countTokens('Hi', 'o200k'))
}

const controller = new AbortController()
void streamOnce(controller.signal).then(() => runAgent(controller.signal))
