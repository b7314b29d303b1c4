// Memory under churn: creates an SseParser or a StreamDecoder per "request", feeds it a whole
// Anthropic stream in 1,460-byte chunks, ends it and drops it. No forced GC: the point is what
// V8's own heuristics let RSS reach. Prints RSS, V8 heap used, V8's external memory and the bytes
// the addon reported to V8 (`_debugExternalBytes`, when the build has it) at 1k/2k/4k/8k objects,
// and the peak RSS sampled after every step.
//   node churn.mjs sse|decoder|message [STREAM_BYTES (default 65536)] [OBJECTS (default 8192)]
//     [CONCURRENT (default 1)]
// message is a StreamDecoder with events off (a caller that wants the reply only). With
// CONCURRENT = 1 each object is fed its whole stream at once and the loop yields to the event
// loop between objects (Node-API finalizers run only from the event loop). With CONCURRENT = C,
// C streams are open at once and each gets one chunk per turn of the event loop, as a server's
// requests do: an object then outlives several scavenges and reaches V8's old generation, which
// only a full GC (triggered by heap growth V8 can see) frees.
//   node churn.mjs client|agent [STREAM_BYTES] [OBJECTS] [CONCURRENT] [full|half|none]
// client streams (Client.stream) and agent runs (Agent.run, one turn) against the replay server
// (node/test/replay.js: `ferroloop serve-replay`, FERROLOOP_BIN or CARGO_TARGET_DIR's debug
// build; a release build keeps the server out of the way), which serves the same stream for
// every request. CONCURRENT workers each open one stream at a time and: full, read it to its
// end; half, read half its events and drop it (no break: the iterator is left as is); none,
// never read it, dropped after a 1 ms timer (the stream goes on in the background).
//   node churn.mjs tracker [STREAM_BYTES] [OBJECTS]
// A ContextTracker per "conversation", given the stream's text as 16 user messages, then dropped.
// Build the addon first (cd node && npm run build:release).

import { createRequire } from 'node:module'

import { anthropicStream, chunked } from './workload.mjs'

const require = createRequire(import.meta.url)
const lib = process.env.FERROLOOP_NODE_LIB || '../../node/lib/index.js'
const ferroloop = require(lib)
// The addon itself (lib/../index.js), for the bytes reported to V8 when it has the counter.
const native = require(new URL('../index.js', new URL(lib, import.meta.url)).pathname)

const [kind = 'sse', bytesArg = '65536', objectsArg = '8192', concurrentArg = '1', how = 'full'] = process.argv.slice(2)
const streamBytes = anthropicStream(7, Number(bytesArg))
const chunks = chunked(streamBytes, 1460)
const objects = Number(objectsArg)
const concurrent = Number(concurrentArg)

function open() {
  if (kind === 'sse') return new ferroloop.SseParser()
  if (kind === 'decoder' || kind === 'message') {
    return new ferroloop.StreamDecoder({ provider: 'anthropic', events: kind === 'decoder' })
  }
  throw new Error(`unknown kind ${kind}: sse, decoder, message, client, agent or tracker`)
}

const mb = (n) => (n / 1048576).toFixed(1)
const reported = () => (typeof native._debugExternalBytes === 'function' ? native._debugExternalBytes() : NaN)
let peak = 0
let done = 0
let nextReport = 1024
function sample() {
  const rss = process.memoryUsage.rss()
  if (rss > peak) peak = rss
  while (done >= nextReport) {
    const m = process.memoryUsage()
    console.log(`${String(nextReport).padStart(7)}  ${mb(m.rss).padStart(6)}  ${mb(peak).padStart(11)}  ${mb(m.heapUsed).padStart(11)}  ${mb(m.external).padStart(11)}  ${mb(reported()).padStart(11)}`)
    nextReport *= 2
  }
}

const remote = kind === 'client' || kind === 'agent'
console.log(`${kind}${remote ? ` (${how})` : ''}, ${bytesArg}-byte stream in ${chunks.length} chunks, ${objects} objects, ${concurrent} at a time`)
console.log('objects  rss MB  peak rss MB  heapUsed MB  external MB  reported MB')
if (remote) {
  const { serveScript } = require('../../node/test/replay.js')
  const server = await serveScript({
    responses: [{ headers: { 'content-type': 'text/event-stream' }, body: { text: streamBytes.toString('utf8') } }],
    when_exhausted: 'repeat_last',
  })
  const client = new ferroloop.Client({ apiKey: 'churn', baseUrl: server.url, fromEnv: false, maxRetries: 0 })
  const agent = new ferroloop.Agent(client, { model: 'm' })
  const request = { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }
  const events = streamBytes.toString('utf8').split('\n\n').length - 1
  const start = () => (kind === 'client' ? client.stream(request) : agent.run('Hi'))
  // One stream, then dropped (a plain function: the caller's frame keeps nothing of it).
  async function one() {
    const stream = start()
    if (how === 'full') {
      for await (const _ of stream);
    } else if (how === 'half') {
      const events = stream[Symbol.asyncIterator]()
      for (let i = 0; i < halfEvents; i++) await events.next()
    } else if (how === 'none') {
      await new Promise((resolve) => setTimeout(resolve, 1))
    } else {
      throw new Error(`unknown mode ${how}: full, half or none`)
    }
  }
  const halfEvents = Math.floor(events / 2)
  let started = 0
  async function worker() {
    while (started < objects) {
      started++
      await one()
      done++
      sample()
    }
  }
  await Promise.all(Array.from({ length: concurrent }, worker))
  await server.close()
} else if (kind === 'tracker') {
  const text = streamBytes.toString('utf8')
  const part = Math.ceil(text.length / 16)
  const messages = Array.from({ length: 16 }, (_, i) => JSON.stringify({ role: 'user', content: text.slice(i * part, (i + 1) * part) }))
  while (done < objects) {
    const tracker = new ferroloop.ContextTracker()
    for (const message of messages) tracker.pushMessage(JSON.parse(message))
    done++
    await new Promise(setImmediate)
    sample()
  }
} else if (concurrent === 1) {
  while (done < objects) {
    const stream = open()
    for (const chunk of chunks) stream.feed(chunk)
    stream.finish()
    done++
    await new Promise(setImmediate)
    sample()
  }
} else {
  // Each slot: [stream, next chunk index]; the first streams start staggered (a negative index
  // waits that many turns) so that streams end one by one.
  const slots = Array.from({ length: concurrent }, (_, i) => [open(), -Math.floor((i * chunks.length) / concurrent)])
  let started = concurrent
  while (done < objects) {
    for (const slot of slots) {
      if (slot[1] < 0) {
        slot[1]++
        continue
      }
      slot[0].feed(chunks[slot[1]++])
      if (slot[1] === chunks.length) {
        slot[0].finish()
        done++
        slot[0] = started++ < objects ? open() : { feed() {}, finish() {} }
        slot[1] = 0
      }
    }
    await new Promise(setImmediate)
    sample()
  }
}
