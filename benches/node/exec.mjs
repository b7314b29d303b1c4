// The executor section of bench.mjs on its own: 10,000 no-op async JS tools through
// ToolExecutor.run (cap 10,000) vs Promise.all over the same tool calls, same workload.
//   node exec.mjs                      wall clock: 3 warm-ups, 15 measured runs each, medians, ratio
//   node exec.mjs ferroloop|promise N  N runs of one side, nothing printed (for instruction counts:
//     valgrind --tool=callgrind node exec.mjs ferroloop 30, minus the same with 10 runs, divided
//     by 20 × 10,000 calls; see BENCHMARKS.md "Node addon")
// Build the addon in release mode first: (cd node && npm run build:release).

import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { ferroloopTools as runTools, makeExecutor, promiseAllTools, TOOL_CALLS, toolUses } from './executor-workload.mjs'

const require = createRequire(import.meta.url)
const ferroloop = require('../../node/lib/index.js')

const ITERATIONS = 15
const executor = makeExecutor(ferroloop)
const ferroloopTools = (uses) => runTools(executor, uses)

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

async function measure(fn, uses) {
  for (let i = 0; i < 3; i++) await fn(uses)
  const times = []
  for (let i = 0; i < ITERATIONS; i++) {
    const start = performance.now()
    await fn(uses)
    times.push(performance.now() - start)
  }
  return median(times)
}

const uses = toolUses()
const [mode, runs] = process.argv.slice(2)
if (mode === undefined) {
  const base = await measure(promiseAllTools, uses)
  const fl = await measure(ferroloopTools, uses)
  console.log(
    `executor (${TOOL_CALLS} no-op async tools): Promise.all ${base.toFixed(2)} ms, ferroloop ToolExecutor ${fl.toFixed(2)} ms, ratio ${(fl / base).toFixed(2)}x`,
  )
} else {
  const fn = mode === 'promise' ? promiseAllTools : ferroloopTools
  for (let i = 0; i < Number(runs); i++) await fn(uses)
}
