// The client and the agent loop with types (checked by `tsc --noEmit`).
import {
  Agent,
  Client,
  FerroloopError,
  StreamTruncatedError,
  ToolExecutor,
  countTokens,
  type AgentEvent,
  type AgentStopErrorCode,
  type AgentStopEvent,
  type CallStatus,
  type RequestMetrics,
  type StopReason,
  type StreamEvent,
  type ToolDefinition,
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
    for await (const event of stream) {
      if (event.type === 'text_delta') process.stdout.write(event.text)
      else console.error(describeStreamEvent(event))
    }
    const message = await stream.message()
    if (stream.metrics !== null) console.log(message.stop_reason, describeMetrics(stream.metrics))
  } catch (err) {
    if (err instanceof StreamTruncatedError) console.error('truncated; partial:', err.code, err.requestId)
    else if (err instanceof FerroloopError) console.error(err.code, err.status, err.requestId)
    else throw err
  }
}

// Narrowing a stream's events on `type` gives each member's fields their own types.
function describeStreamEvent(e: StreamEvent): string {
  switch (e.type) {
    case 'retry': {
      const attempt: number = e.attempt
      const status: number | null = e.status
      const code: string = e.code
      const overloaded: boolean = e.overloaded
      const waitMs: number = e.waitMs
      const reason: string = e.reason
      return `retry ${attempt} (${status ?? code}${overloaded ? ', overloaded' : ''}) in ${waitMs} ms: ${reason}`
    }
    case 'stalled': {
      const elapsedMs: number = e.elapsedMs
      return `no event for ${elapsedMs} ms`
    }
    case 'text_delta': {
      const text: string = e.text
      return text
    }
    default:
      // The other members are the decoder's (see decode.ts).
      return e.type
  }
}

function describeMetrics(m: RequestMetrics): string {
  const requestId: string | null = m.requestId
  const attempts: number = m.attempts
  const retries: number = m.retries
  const httpVersion: string | null = m.httpVersion
  const timings: Array<number | null> = [m.timeToHeadersMs, m.timeToFirstEventMs, m.timeToFirstTokenMs, m.totalMs]
  const bytesReceived: number = m.bytesReceived
  const events: number = m.events
  const usage: Record<string, unknown> | null = m.usage
  return JSON.stringify({ requestId, attempts, retries, httpVersion, timings, bytesReceived, events, usage })
}

// Every member of AgentEvent, narrowed on `type` (and `context` on `action`), each field taken
// at its own type; `never` at the end proves the switch covers the union.
function describeAgentEvent(e: AgentEvent): string {
  switch (e.type) {
    case 'turn_start': {
      const turn: number = e.turn
      const estimatedInputTokens: number = e.estimatedInputTokens
      return `turn ${turn} (~${estimatedInputTokens} tokens in)`
    }
    case 'text_delta': {
      const text: string = e.text
      return text
    }
    case 'thinking_delta': {
      const thinking: string = e.thinking
      return thinking
    }
    case 'tool_started': {
      const toolUseId: string = e.toolUseId
      const name: string = e.name
      const input: unknown = e.input
      return `${name} (${toolUseId}) ${JSON.stringify(input)}`
    }
    case 'tool_progress': {
      const toolUseId: string = e.toolUseId
      const data: unknown = e.data
      return `${toolUseId}: ${JSON.stringify(data)}`
    }
    case 'tool_finished': {
      const toolUseId: string = e.toolUseId
      const name: string = e.name
      const isError: boolean = e.isError
      const status: CallStatus = e.status
      const durationMs: number = e.durationMs
      return `${name} (${toolUseId}): ${status}${isError ? ' (error)' : ''} in ${durationMs.toFixed(1)} ms`
    }
    case 'retry': {
      const call: 'turn' | 'compaction' = e.call
      const attempt: number = e.attempt
      const status: number | null = e.status
      const code: string = e.code
      const overloaded: boolean = e.overloaded
      const waitMs: number = e.waitMs
      return `${call} attempt ${attempt} after ${status ?? code}${overloaded ? ' (overloaded)' : ''}, in ${waitMs} ms`
    }
    case 'model_fallback': {
      const call: 'turn' | 'compaction' = e.call
      const from: string = e.from
      const to: string = e.to
      const reason: 'overloaded' | 'repeated_529' = e.reason
      const error: string = e.error
      return `${call}: ${from} -> ${to} (${reason}: ${error})`
    }
    case 'max_tokens_raised': {
      const turn: number = e.turn
      const from: number = e.from
      const to: number = e.to
      return `turn ${turn} asked again with max_tokens ${from} -> ${to}`
    }
    case 'context':
      if (e.action === 'microcompact') {
        const cleared: number = e.cleared
        const tokensBefore: number = e.tokensBefore
        return `microcompact: ${cleared} results cleared (${tokensBefore} tokens before)`
      } else {
        const action: 'compaction' = e.action
        const messagesBefore: number = e.messagesBefore
        const messagesAfter: number = e.messagesAfter
        const trigger: 'auto' | 'reactive' = e.trigger
        return `${action} (${trigger}): ${messagesBefore} -> ${messagesAfter} messages`
      }
    case 'cache_break': {
      const previous: number = e.previous
      const current: number = e.current
      const changed: Array<'system' | 'tools' | 'messages'> = e.changed
      return `cache read ${previous} -> ${current}; changed: ${changed.join(', ') || 'nothing'}`
    }
    case 'usage': {
      const turn: number = e.turn
      const call: 'turn' | 'compaction' = e.call
      const usage: Record<string, unknown> | null = e.usage
      const estimatedInputTokens: number = e.estimatedInputTokens
      const timeToFirstTokenMs: number | null = e.timeToFirstTokenMs
      return `${call} ${turn}: ${JSON.stringify(usage)} (estimated ${estimatedInputTokens}, ttft ${timeToFirstTokenMs})`
    }
    case 'turn_end': {
      const turn: number = e.turn
      const stopReason: string | null = e.stopReason
      return `turn ${turn} ended: ${stopReason}`
    }
    case 'stop':
      return describeStop(e)
    default: {
      const unreachable: never = e
      return unreachable
    }
  }
}

function describeStop(e: AgentStopEvent): string {
  const reason: StopReason = e.reason
  const error: string | null = e.error
  const errorCode: AgentStopErrorCode | null = e.errorCode
  const messages: unknown[] = e.messages
  const counts: number[] = [e.turns, e.toolCalls, e.inputTokens, e.outputTokens]
  // What the client knew of the failed call that ended the run (null otherwise).
  const status: number | null = e.status
  const requestId: string | null = e.requestId
  const retryAfterMs: number | null = e.retryAfterMs
  const failed = status === null ? '' : ` (HTTP ${status}, request ${requestId}, retry after ${retryAfterMs} ms)`
  return `stopped: ${reason} ${errorCode ?? ''} ${error ?? ''}${failed} after ${counts.join('/')} (${messages.length} messages)`
}

// An agent's own tools have a schema; tools from `extra.tools` (the provider's) come as given.
function describeDefinition(d: ToolDefinition): string {
  if (d.type === undefined) {
    const name: string = d.name
    const description: string | undefined = d.description
    const schema: Record<string, unknown> = d.input_schema
    return `${name}: ${description ?? ''} ${JSON.stringify(schema)}`
  }
  const type: string = d.type
  return `provider tool ${type} ${JSON.stringify(d)}`
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
  for (const definition of agent.toolDefinitions()) console.log(describeDefinition(definition))
  for await (const event of agent.run('What is the weather in Paris?', { signal })) {
    const e: AgentEvent = event
    if (e.type === 'text_delta') process.stdout.write(e.text)
    else console.log(describeAgentEvent(e))
  }
  const stop = await new Agent(client, { model: 'claude-sonnet-4-5' }).run('Hi').result()
  console.log(stop.reason, stop.inputTokens + stop.outputTokens, countTokens('Hi', 'o200k'))
}

const controller = new AbortController()
void streamOnce(controller.signal).then(() => runAgent(controller.signal))
