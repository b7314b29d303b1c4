// The SSE section of bench.mjs on its own, interleaved: every iteration runs ferroloop's
// SseParser and eventsource-parser (+ TextDecoder) back to back on the same chunks, so a load
// change on the machine hits both sides alike; the ratio is taken per iteration.
//   node sse.mjs [--iterations N]      wall clock: 3 warm-ups, N (default 15) measured pairs per
//     chunk size (1,460 B and 16 KiB); medians of each side and of the per-pair ratios
//   node sse.mjs ferroloop|peer SIZE N  N runs of one side at one chunk size, nothing printed (for
//     instruction counts: valgrind --tool=callgrind node sse.mjs ferroloop 16384 30, minus the
//     same with 10 runs; see BENCHMARKS.md "Node addon")
// Build the addon in release mode first: (cd node && npm run build:release).

import { performance } from 'node:perf_hooks'

import { anthropicStream, chunked } from './workload.mjs'
import { eventsourceParserSse, ferroloopSse } from './sse-workload.mjs'

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

const args = process.argv.slice(2)
const input = anthropicStream(42, 6_000_000)

if (args[0] === 'ferroloop' || args[0] === 'peer') {
  const chunks = chunked(input, Number(args[1]))
  const fn = args[0] === 'peer' ? eventsourceParserSse : ferroloopSse
  for (let i = 0; i < Number(args[2]); i++) fn(chunks)
} else {
  const at = args.indexOf('--iterations')
  const iterations = at >= 0 ? Number(args[at + 1]) : 15
  for (const size of [1460, 16384]) {
    const chunks = chunked(input, size)
    const fl = []
    const peer = []
    const ratios = []
    for (let i = 0; i < 3 + iterations; i++) {
      let start = performance.now()
      const a = ferroloopSse(chunks)
      const flMs = performance.now() - start
      start = performance.now()
      const b = eventsourceParserSse(chunks)
      const peerMs = performance.now() - start
      if (a.events !== b.events || a.dataChars !== b.dataChars || a.typeChars !== b.typeChars) {
        throw new Error(`SSE results differ: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`)
      }
      if (i < 3) continue
      fl.push(flMs)
      peer.push(peerMs)
      ratios.push(peerMs / flMs)
    }
    console.log(
      `sse chunk ${size}: ferroloop ${median(fl).toFixed(2)} ms, eventsource-parser ${median(peer).toFixed(2)} ms, ratio (median of pairs) ${median(ratios).toFixed(2)}x`,
    )
  }
}
