// Client streams (or one-turn agent runs) read to their end, several builds in one process
// against one replay server, alternating per round, so a load change hits every build alike:
// the median time of a round of N streams read one after another, and the median of the
// per-round ratios (each build's time / the first build's).
//   node stream-ab.mjs [BYTES [N [ROUNDS [client|agent]]]]      defaults 1048576 20 15 client
//   LIBS=a/lib/index.js,b/lib/index.js node stream-ab.mjs ...   builds side by side
// Build the addon in release mode first: (cd node && npm run build:release).
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'
import { anthropicStream } from './workload.mjs'
const require = createRequire(import.meta.url)
const libs = (process.env.LIBS || '../../node/lib/index.js').split(',')
const builds = libs.map((path) => require(path))
const { serveScript } = require('../../node/test/replay.js')
const [bytesArg = '1048576', nArg = '20', roundsArg = '15', kind = 'client'] = process.argv.slice(2)
if (kind !== 'client' && kind !== 'agent') throw new Error(`unknown kind '${kind}' (client or agent)`)
const body = anthropicStream(7, Number(bytesArg)).toString('utf8')
const server = await serveScript({
  responses: [{ headers: { 'content-type': 'text/event-stream' }, body: { text: body } }],
  when_exhausted: 'repeat_last',
})
const request = { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }
const made = builds.map((lib) => {
  const client = new lib.Client({ apiKey: 'k', baseUrl: server.url, fromEnv: false, maxRetries: 0 })
  return { client, agent: new lib.Agent(client, { model: 'm' }) }
})
async function round(side) {
  const started = performance.now()
  for (let i = 0; i < Number(nArg); i++) {
    const stream = kind === 'client' ? side.client.stream(request) : side.agent.run('Hi')
    for await (const _ of stream);
  }
  return performance.now() - started
}
const times = made.map(() => [])
for (let warm = 0; warm < 3; warm++) for (const side of made) await round(side)
for (let r = 0; r < Number(roundsArg); r++) {
  // Every build goes first in turn.
  const order = made.map((_, i) => (i + r) % made.length)
  for (const i of order) times[i].push(await round(made[i]))
}
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}
libs.forEach((path, i) => {
  const ratio = median(times[i].map((t, r) => t / times[0][r]))
  console.log(`${kind} ${bytesArg} B × ${nArg}, ${path}: ${median(times[i]).toFixed(1)} ms, ×${ratio.toFixed(3)} of ${libs[0]}`)
})
await server.close()
