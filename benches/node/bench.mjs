// ferroloop's Node addon side by side with the JavaScript peers, on the same bytes:
//   * SSE alone: ferroloop SseParser vs eventsource-parser (bytes → events, UTF-8 decoding included)
//   * decode + accumulate: ferroloop StreamDecoder vs the official @anthropic-ai/sdk
//     (its SSE decoding + MessageStream accumulation, driven through a stubbed fetch)
//   * executor overhead: 10,000 no-op async tools through ToolExecutor vs Promise.all
// Within the SSE and decode sections the sides run interleaved (each iteration times every side
// once, the order rotating), so a load change on this shared machine hits them alike; prints
// each side's median (ms) and the median of the per-iteration ratios. The executor's sides run
// in blocks (see there). Build the addon in release mode first:
//   (cd node && npm run build:release) && (cd benches/node && npm install && node bench.mjs)
// Options: --iterations N (default 15), --bytes N (default 6000000), --json (machine-readable).

import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import Anthropic from '@anthropic-ai/sdk'

import { anthropicStream, chunked } from './workload.mjs'
import { eventsourceParserSse, ferroloopSse } from './sse-workload.mjs'
import { TOOL_CALLS, ferroloopTools, makeExecutor, promiseAllTools, toolUses } from './executor-workload.mjs'

const require = createRequire(import.meta.url)
const ferroloop = require('../../node/lib/index.js')

const args = process.argv.slice(2)
const option = (name, fallback) => {
  const i = args.indexOf(name)
  return i >= 0 ? Number(args[i + 1]) : fallback
}
const ITERATIONS = option('--iterations', 15)
const BYTES = option('--bytes', 6_000_000)
const JSON_OUT = args.includes('--json')

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * Runs each of `fns` (sync or async) three times to warm up, then ITERATIONS rounds in which
 * every function runs once, the order rotating by one each round; returns, per function, its
 * median ms, its per-round times and the result of its last warm-up run.
 */
async function measureInterleaved(fns, iterations = ITERATIONS) {
  const checks = []
  for (const fn of fns) {
    let check
    for (let i = 0; i < 3; i++) check = await fn()
    checks.push(check)
  }
  const times = fns.map(() => [])
  for (let round = 0; round < iterations; round++) {
    for (let k = 0; k < fns.length; k++) {
      const i = (round + k) % fns.length
      const start = performance.now()
      await fns[i]()
      times[i].push(performance.now() - start)
    }
  }
  return fns.map((_, i) => ({ ms: median(times[i]), times: times[i], check: checks[i], interleaved: fns.length > 1 }))
}

// ---- SSE alone -------------------------------------------------------------------------------

// Both sides are in sse-workload.mjs (shared with sse.mjs, which runs them interleaved).

// ---- decode + accumulate ---------------------------------------------------------------------

function bodyOf(chunks) {
  let i = 0
  return new ReadableStream({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++])
      else controller.close()
    },
  })
}

const REQUEST = { model: 'claude-sonnet-4-20250514', max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }] }

async function sdkDecode(chunks) {
  const client = new Anthropic({
    apiKey: 'bench',
    maxRetries: 0,
    fetch: async () =>
      new Response(bodyOf(chunks), { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  })
  const message = await client.messages.stream(REQUEST).finalMessage()
  return { blocks: message.content.length, stop: message.stop_reason }
}

async function ferroloopDecode(chunks, events) {
  const decoder = new ferroloop.StreamDecoder({ provider: 'anthropic', events })
  const response = new Response(bodyOf(chunks), { headers: { 'content-type': 'text/event-stream' } })
  for await (const chunk of response.body) decoder.feed(chunk)
  // finish() returns the final message, as finalMessage() does on the SDK's side.
  const message = decoder.finish()
  return { blocks: message.content.length, stop: message.stop_reason }
}

// ---- executor overhead -----------------------------------------------------------------------

// The workload and both sides are in executor-workload.mjs (shared with exec.mjs).

// ---- report ----------------------------------------------------------------------------------

const rows = []
function row(group, name, { ms, times, check, interleaved }, bytes) {
  rows.push({ group, name, ms, times, interleaved, mbPerS: bytes ? bytes / 1e6 / (ms / 1e3) : null, check })
}

/** `a`'s time over `b`'s: the median of the per-round ratios when the two were interleaved,
 * else the ratio of their medians. */
function medianRatio(a, b) {
  return a.interleaved ? median(a.times.map((t, i) => t / b.times[i])) : a.ms / b.ms
}

const input = anthropicStream(42, BYTES)
for (const size of [1460, 16384]) {
  const chunks = chunked(input, size)
  const [fl, esp] = await measureInterleaved([() => ferroloopSse(chunks), () => eventsourceParserSse(chunks)])
  if (
    fl.check.events !== esp.check.events ||
    fl.check.dataChars !== esp.check.dataChars ||
    fl.check.typeChars !== esp.check.typeChars
  ) {
    throw new Error(`SSE results differ: ${JSON.stringify(fl.check)} vs ${JSON.stringify(esp.check)}`)
  }
  row(`sse (chunk ${size})`, 'ferroloop SseParser', fl, input.length)
  row(`sse (chunk ${size})`, 'eventsource-parser', esp, input.length)
}

{
  const chunks = chunked(input, 16384)
  // events: false accumulates only (what MessageStream.finalMessage() needs); events: true
  // also hands every typed event to JS (what a streaming UI consumes).
  const [sdk, fl, flEvents] = await measureInterleaved([
    () => sdkDecode(chunks),
    () => ferroloopDecode(chunks, false),
    () => ferroloopDecode(chunks, true),
  ])
  for (const side of [fl, flEvents]) {
    if (side.check.blocks !== sdk.check.blocks) throw new Error('decoded messages differ')
  }
  row('decode+accumulate (chunk 16384)', '@anthropic-ai/sdk MessageStream', sdk, input.length)
  row('decode+accumulate (chunk 16384)', 'ferroloop StreamDecoder', fl, input.length)
  row('decode+accumulate (chunk 16384)', 'ferroloop StreamDecoder (+events)', flEvents, input.length)
}

{
  const uses = toolUses()
  const executor = makeExecutor(ferroloop)
  // In blocks, not interleaved: a run is 2-4 ms and mostly allocation, so run by run each side
  // would pay for the other's garbage (measured: Promise.all 2.0-2.6 ms right after the
  // executor, 2.9-3.5 ms in a block of its own). Each block is timed as in exec.mjs, with more
  // runs (a run is short and its time swings with the garbage collector's state).
  const runs = Math.max(ITERATIONS, 61)
  const [base] = await measureInterleaved([async () => ({ results: await promiseAllTools(uses) })], runs)
  const [fl] = await measureInterleaved([async () => ({ results: await ferroloopTools(executor, uses) })], runs)
  row(`executor (${TOOL_CALLS} no-op async tools)`, 'Promise.all', base, 0)
  row(`executor (${TOOL_CALLS} no-op async tools)`, 'ferroloop ToolExecutor', fl, 0)
}

if (JSON_OUT) {
  process.stdout.write(`${JSON.stringify({ bytes: input.length, iterations: ITERATIONS, rows }, null, 1)}\n`)
} else {
  console.log(`input: ${input.length} bytes, ${ITERATIONS} iterations, medians; node ${process.version}`)
  for (const group of [...new Set(rows.map((r) => r.group))]) {
    console.log(`\n${group}`)
    const inGroup = rows.filter((r) => r.group === group)
    // Each ferroloop row against the group's peer (the first row that is not ferroloop's).
    const peer = inGroup.find((r) => !r.name.startsWith('ferroloop'))
    for (const r of inGroup) {
      const rate = r.mbPerS === null ? '' : `${r.mbPerS.toFixed(1).padStart(8)} MB/s`
      const ratio =
        peer && r.name.startsWith('ferroloop')
          ? `   time ratio to ${peer.name} ${medianRatio(r, peer).toFixed(3)} (speedup ${medianRatio(peer, r).toFixed(2)}x, ${r.interleaved ? 'median of rounds' : 'ratio of medians'})`
          : ''
      console.log(`  ${r.name.padEnd(34)} ${r.ms.toFixed(2).padStart(9)} ms ${rate}${ratio}`)
    }
  }
}
