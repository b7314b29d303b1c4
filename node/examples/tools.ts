// The tool executor with types (checked by `tsc --noEmit`).
import { AbortError, ToolExecutor, type ToolResult, type TurnEvent } from 'ferroloop'

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

async function main(): Promise<void> {
  const controller = new AbortController()
  const results: ToolResult[] = await executor.run(
    [
      { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'a.txt' } },
      { type: 'tool_use', id: 'toolu_2', name: 'bash', input: { command: 'ls' } },
    ],
    { signal: controller.signal },
  )
  for (const result of results) console.log(result.tool_use_id, result.is_error, result.content)

  const turn = executor.turn()
  turn.submit({ id: 'toolu_3', name: 'read_file', input: { path: 'b.txt' } })
  turn.seal()
  for await (const event of turn) {
    const e: TurnEvent = event
    if (e.type === 'result') console.log(e.result.content)
    else if (e.type === 'finished') console.log(e.status, e.durationMs)
  }

  try {
    await executor.run([], { signal: AbortSignal.abort() })
  } catch (err) {
    if (err instanceof AbortError) console.log(err.code)
  }
}

void main()
