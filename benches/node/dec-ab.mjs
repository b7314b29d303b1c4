// The decode + accumulate section of bench.mjs on its own, interleaved: every iteration runs the
// official SDK (`messages.stream().finalMessage()` over a stubbed fetch) and ferroloop's
// StreamDecoder back to back on the same 16 KiB chunks, so a load change hits all sides alike;
// medians of each side and of the per-iteration ratios (SDK time / this time).
//   N=21 node dec-ab.mjs                      3 warm-ups, N (default 15) measured iterations
//   LIBS=a/lib/index.js,b/lib/index.js node dec-ab.mjs   several builds side by side
// Two ferroloop variants per build: `finish` (the final message from finish(), what bench.mjs
// times) and `finish+message` (finish(), then message() again: bench.mjs before 2026-12-01).
// Build the addon in release mode first: (cd node && npm run build:release).
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import Anthropic from '@anthropic-ai/sdk'
import { anthropicStream, chunked } from './workload.mjs'
const require = createRequire(import.meta.url)
const libs = (process.env.LIBS || '../../node/lib/index.js').split(',')
const builds = libs.map((p) => require(p))
const input = anthropicStream(42, 6_000_000)
const chunks = chunked(input, 16384)
function bodyOf(chunks) {
  let i = 0
  return new ReadableStream({ pull(c) { if (i < chunks.length) c.enqueue(chunks[i++]); else c.close() } })
}
const REQUEST = { model: 'claude-sonnet-4-20250514', max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }] }
async function sdk() {
  const client = new Anthropic({ apiKey: 'bench', maxRetries: 0,
    fetch: async () => new Response(bodyOf(chunks), { status: 200, headers: { 'content-type': 'text/event-stream' } }) })
  const m = await client.messages.stream(REQUEST).finalMessage()
  return m.content.length
}
async function fl(lib, finishOnly) {
  const d = new lib.StreamDecoder({ provider: 'anthropic', events: false })
  const r = new Response(bodyOf(chunks), { headers: { 'content-type': 'text/event-stream' } })
  for await (const c of r.body) d.feed(c)
  if (finishOnly) return d.finish().content.length
  d.finish()
  return d.message().content.length
}
const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2 }
const variants = [['sdk', sdk]]
builds.forEach((lib, i) => {
  variants.push([`b${i} finish+message`, () => fl(lib, false)])
  variants.push([`b${i} finish`, () => fl(lib, true)])
})
const times = variants.map(() => [])
const iterations = Number(process.env.N || 15)
for (let it = 0; it < 3 + iterations; it++) {
  for (let v = 0; v < variants.length; v++) {
    const s = performance.now()
    await variants[v][1]()
    if (it >= 3) times[v].push(performance.now() - s)
  }
}
for (let v = 0; v < variants.length; v++) {
  const ratios = times[0].map((t, i) => t / times[v][i])
  console.log(`${variants[v][0].padEnd(22)} ${median(times[v]).toFixed(2).padStart(8)} ms   sdk/this ${median(ratios).toFixed(2)}x`)
}
