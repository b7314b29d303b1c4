// Where the time of SseParser.feed goes, against the budget the ≥ 3× target leaves (issue 9):
// each iteration times, back to back on the same chunks,
//   - the whole of SseParser.feed (as sse.mjs) and eventsource-parser (+ TextDecoder);
//   - the native call alone (feedBatch: the core's parse, the batch text, V8's string, the
//     offsets; no JavaScript objects);
//   - the JavaScript alone: lib/sse.js's decodeBatch over batches recorded beforehand, with the
//     same consumer loop (the objects and substrings any feed returning SseEvent[] must make);
//   - the native call with four extra feedBatch(':\n') per chunk (each completes nothing): the
//     cost of one N-API call in place, amid the real work (higher than in a tight loop of calls).
// Ratios are medians of per-iteration values. The core's own parse of the same bytes is
// `ferroloop bench --filter sse/anthropic` (Rust, no binding).
//   node sse-floor.mjs [--iterations N]     (default 21, after 3 warm-ups)
// Build the addon in release mode first: (cd node && npm run build:release).

import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

import { anthropicStream, chunked } from './workload.mjs'
import { eventsourceParserSse, ferroloopSse } from './sse-workload.mjs'

const require = createRequire(import.meta.url)
const native = require('../../node/index.js')
const { BatchOffsets } = require('../../node/lib/batch.js')
const { decodeBatch } = require('../../node/lib/sse.js')

const EXTRA_CALLS = 4
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1]

/** Every chunk's batch as feedBatch returns it: [text, offsets, count], or null. */
function recordBatches(chunks) {
  const parser = new native.SseParser({})
  const offsets = new BatchOffsets(6)
  return chunks.map((chunk) => {
    const text = parser.feedBatch(chunk, offsets.bytes)
    if (text === null) return null
    const count = offsets.values[0]
    const values = offsets.fit(count, parser)
    return [text, Uint32Array.from(values.subarray(0, 1 + 6 * count)), count]
  })
}

/** decodeBatch over recorded batches, read as ferroloopSse reads events. */
function javascriptOnly(batches) {
  const types = []
  let events = 0
  let dataChars = 0
  let typeChars = 0
  for (const batch of batches) {
    if (batch === null) continue
    for (const ev of decodeBatch(batch[0], batch[1], batch[2], types)) {
      events++
      dataChars += ev.data.length
      typeChars += ev.event.length
    }
  }
  return { events, dataChars, typeChars }
}

/** feedBatch alone, and `extraCalls` empty feedBatch calls after each chunk. */
function nativeOnly(chunks, extraCalls) {
  const parser = new native.SseParser({})
  const offsets = new BatchOffsets(6)
  const empty = Buffer.from(':\n')
  let events = 0
  for (const chunk of chunks) {
    if (parser.feedBatch(chunk, offsets.bytes) !== null) events += offsets.values[0]
    for (let i = 0; i < extraCalls; i++) parser.feedBatch(empty, offsets.bytes)
  }
  return events
}

const at = process.argv.indexOf('--iterations')
const iterations = at >= 0 ? Number(process.argv[at + 1]) : 21
const input = anthropicStream(42, 6_000_000)
for (const size of [1460, 16384]) {
  const chunks = chunked(input, size)
  const batches = recordBatches(chunks)
  const times = { feed: [], peer: [], native: [], js: [], call: [] }
  for (let i = 0; i < 3 + iterations; i++) {
    const timed = (fn) => {
      const start = performance.now()
      const result = fn()
      return [performance.now() - start, result]
    }
    const [feed, a] = timed(() => ferroloopSse(chunks))
    const [peer, b] = timed(() => eventsourceParserSse(chunks))
    const [nativeMs, events] = timed(() => nativeOnly(chunks, 0))
    const [js, c] = timed(() => javascriptOnly(batches))
    const [withCall] = timed(() => nativeOnly(chunks, EXTRA_CALLS))
    for (const other of [b, c]) {
      if (a.events !== other.events || a.dataChars !== other.dataChars || a.typeChars !== other.typeChars) {
        throw new Error(`SSE results differ: ${JSON.stringify(a)} vs ${JSON.stringify(other)}`)
      }
    }
    if (events !== a.events) throw new Error(`feedBatch completed ${events} events, feed ${a.events}`)
    if (i < 3) continue
    times.feed.push(feed)
    times.peer.push(peer)
    times.native.push(nativeMs)
    times.js.push(js)
    times.call.push(((withCall - nativeMs) / (EXTRA_CALLS * chunks.length)) * 1e6)
  }
  const [feed, peer, nativeMs, js] = [times.feed, times.peer, times.native, times.js].map(median)
  console.log(
    `sse chunk ${size} (${chunks.length} chunks): feed ${feed.toFixed(2)} ms, eventsource-parser ${peer.toFixed(2)} ms ` +
      `(${(peer / feed).toFixed(2)}x); budget for 3x ${(peer / 3).toFixed(2)} ms; native call alone ${nativeMs.toFixed(2)} ms, ` +
      `JavaScript alone ${js.toFixed(2)} ms; one N-API call in place ${median(times.call).toFixed(0)} ns`,
  )
}
