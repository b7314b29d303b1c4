// Two builds of ferroloop's SseParser in one process, alternated every iteration (the SSE
// section's workload, both chunk sizes), for steps too small for sse.mjs's noise:
//   node sse-ab.mjs A/lib/index.js B/lib/index.js [iterations]
// Each path is a build's `node/lib/index.js` (copy `node/index.js`, `node/lib/` and the `.node`
// file of each build into its own directory). Prints the median of each side and the median of
// the per-iteration ratios A/B (below 1: A is faster). Run it in both orders; an A/A run gives
// 1.00 ± 0.01 on an idle machine.

import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

import { anthropicStream, chunked } from './workload.mjs'

const require = createRequire(import.meta.url)
const [pathA, pathB, iterations = '21'] = process.argv.slice(2)
if (!pathA || !pathB) throw new Error('usage: node sse-ab.mjs A/lib/index.js B/lib/index.js [iterations]')
const builds = [require(pathA), require(pathB)]
const input = anthropicStream(42, 6_000_000)

/** The same consumption as sse-workload.mjs's ferroloopSse: every event's data and type read. */
function run(ferroloop, chunks) {
  const parser = new ferroloop.SseParser()
  let events = 0
  let chars = 0
  for (const chunk of chunks) {
    for (const ev of parser.feed(chunk)) {
      events++
      chars += ev.data.length + ev.event.length
    }
  }
  parser.finish()
  return events + chars
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

for (const size of [1460, 16384]) {
  const chunks = chunked(input, size)
  const times = [[], []]
  const ratios = []
  for (let i = 0; i < 3 + Number(iterations); i++) {
    const results = []
    const ms = builds.map((build) => {
      const start = performance.now()
      results.push(run(build, chunks))
      return performance.now() - start
    })
    if (results[0] !== results[1]) throw new Error(`the builds disagree: ${results[0]} vs ${results[1]}`)
    if (i < 3) continue
    times[0].push(ms[0])
    times[1].push(ms[1])
    ratios.push(ms[0] / ms[1])
  }
  console.log(
    `sse chunk ${size}: A ${median(times[0]).toFixed(2)} ms, B ${median(times[1]).toFixed(2)} ms, A/B (median of pairs) ${median(ratios).toFixed(3)}`,
  )
}
