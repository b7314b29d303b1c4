// The tool executor with types (checked by `tsc --noEmit`).
import { AbortError, ToolExecutor, type CallStatus, type ToolResult, type ToolResultBlock, type TurnEvent } from 'ferroloop'

interface ReadInput {
  path: string
}

const executor = new ToolExecutor({ maxConcurrency: 8, cleanupGraceMs: 1000 })
  .tool<ReadInput>({ name: 'read_file', concurrencySafe: true, timeoutMs: 5000 }, async (input, ctx) => {
    ctx.signal.throwIfAborted()
    return `contents of ${input.path}`
  })
  .tool<{ sql: string }>(
    // Decided per call: reads run in parallel, writes alone.
    { name: 'query', concurrencySafe: (input) => input.sql.trimStart().toLowerCase().startsWith('select') },
    async (input) => `ran ${input.sql}`,
  )
  .tool({ name: 'bash', cancelsSiblingsOnError: true, schema: { type: 'object' } }, async () => [
    { type: 'text', text: 'ok' },
  ])
  // Any other JSON value is sent as its JSON text: a number, a boolean, an object.
  .tool<{ path: string }>({ name: 'line_count', concurrencySafe: true }, (input) => input.path.length)
  .tool<{ path: string }>({ name: 'exists', concurrencySafe: true }, async (input) => input.path !== '')

// Every member of TurnEvent, narrowed on `type`, each field at its own type.
function describe(e: TurnEvent): string {
  switch (e.type) {
    case 'started': {
      const index: number = e.index
      const toolUseId: string = e.toolUseId
      const tool: string = e.tool
      const queuedMs: number = e.queuedMs
      return `#${index} ${tool} (${toolUseId}) started after ${queuedMs} ms in the queue`
    }
    case 'progress': {
      const index: number = e.index
      const toolUseId: string = e.toolUseId
      const data: unknown = e.data
      return `#${index} (${toolUseId}): ${JSON.stringify(data)}`
    }
    case 'finished': {
      const index: number = e.index
      const toolUseId: string = e.toolUseId
      const tool: string = e.tool
      const status: CallStatus = e.status
      const durationMs: number = e.durationMs
      return `#${index} ${tool} (${toolUseId}): ${status} in ${durationMs} ms`
    }
    case 'detached': {
      const index: number = e.index
      const toolUseId: string = e.toolUseId
      const tool: string = e.tool
      return `#${index} ${tool} (${toolUseId}) ignored its abort: detached`
    }
    case 'result': {
      const index: number = e.index
      return `#${index}: ${describeResult(e.result)}`
    }
    default: {
      const unreachable: never = e
      return unreachable
    }
  }
}

function describeResult(result: ToolResult): string {
  const type: 'tool_result' = result.type
  const toolUseId: string = result.tool_use_id
  const isError: boolean = result.is_error
  const content: string | ToolResultBlock[] = result.content
  const text = typeof content === 'string' ? content : content.map((block) => block.type).join(', ')
  return `${type} for ${toolUseId}${isError ? ' (error)' : ''}: ${text}`
}

async function main(): Promise<void> {
  const controller = new AbortController()
  const results: ToolResult[] = await executor.run(
    [
      { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'a.txt' } },
      { type: 'tool_use', id: 'toolu_2', name: 'bash', input: { command: 'ls' } },
    ],
    { signal: controller.signal },
  )
  for (const result of results) console.log(describeResult(result))

  const turn = executor.turn()
  turn.submit({ id: 'toolu_3', name: 'read_file', input: { path: 'b.txt' } })
  turn.seal()
  for await (const event of turn) console.log(describe(event))
  const answered: ToolResult[] = await turn.results()
  console.log(answered.length)

  try {
    await executor.run([], { signal: AbortSignal.abort() })
  } catch (err) {
    if (err instanceof AbortError) console.log(err.code)
  }
}

void main()
