// Both sides of the SSE-alone benchmark (shared by bench.mjs and sse.mjs). Both read `data` and
// `event` of every event (their lengths are compared by the callers), so neither can leave a
// field unmaterialised.

import { createRequire } from 'node:module'
import { createParser } from 'eventsource-parser'

const require = createRequire(import.meta.url)
// FERROLOOP_NODE_LIB points at another build's lib/index.js (to compare two builds).
const ferroloop = require(process.env.FERROLOOP_NODE_LIB || '../../node/lib/index.js')

/** ferroloop's SseParser over `chunks`: event count and the summed lengths of `data` and `event`. */
export function ferroloopSse(chunks) {
  const parser = new ferroloop.SseParser()
  let events = 0
  let dataChars = 0
  let typeChars = 0
  for (const chunk of chunks) {
    for (const ev of parser.feed(chunk)) {
      events++
      dataChars += ev.data.length
      typeChars += ev.event.length
    }
  }
  parser.finish()
  return { events, dataChars, typeChars }
}

/** The same with eventsource-parser, fed the chunks through a streaming TextDecoder. */
export function eventsourceParserSse(chunks) {
  let events = 0
  let dataChars = 0
  let typeChars = 0
  const parser = createParser({
    onEvent(ev) {
      events++
      dataChars += ev.data.length
      // eventsource-parser leaves `event` undefined for an unnamed event ('message' here).
      typeChars += ev.event === undefined ? 7 : ev.event.length
    },
  })
  const decoder = new TextDecoder()
  for (const chunk of chunks) parser.feed(decoder.decode(chunk, { stream: true }))
  parser.feed(decoder.decode())
  return { events, dataChars, typeChars }
}
