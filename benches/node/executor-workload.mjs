// The executor workload shared by bench.mjs and exec.mjs: 10,000 no-op async tools, run through
// ferroloop's ToolExecutor (cap 10,000) and through Promise.all over the same tool calls.

export const TOOL_CALLS = 10_000

/** The tool calls: `{ type: 'tool_use', id, name: 'noop', input: { i } }`. */
export function toolUses() {
  const out = new Array(TOOL_CALLS)
  for (let i = 0; i < TOOL_CALLS; i++) out[i] = { type: 'tool_use', id: `toolu_${i}`, name: 'noop', input: { i } }
  return out
}

/** The floor: every call through Promise.all, each result a tool_result block. */
export async function promiseAllTools(uses) {
  const noop = async (input) => `ok ${input.i}`
  const results = await Promise.all(
    uses.map(async (use) => ({ type: 'tool_result', tool_use_id: use.id, content: await noop(use.input), is_error: false })),
  )
  return results.length
}

/** A ToolExecutor with the one `noop` tool, concurrency-safe, cap TOOL_CALLS. */
export function makeExecutor(ferroloop) {
  const executor = new ferroloop.ToolExecutor({ maxConcurrency: TOOL_CALLS })
  executor.tool({ name: 'noop', concurrencySafe: true }, async (input) => `ok ${input.i}`)
  return executor
}

/** Every call through the executor; checks the last result. */
export async function ferroloopTools(executor, uses) {
  const results = await executor.run(uses)
  if (results[TOOL_CALLS - 1].content !== `ok ${TOOL_CALLS - 1}`) throw new Error('wrong result')
  return results.length
}
