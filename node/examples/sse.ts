// Parse a Server-Sent-Events stream with ferroloop, with full types (checked by `tsc --noEmit`).
import { FerroloopError, InternalError, SseParser, type SseEvent } from 'ferroloop'

const parser = new SseParser({ maxEventBytes: 1 << 20 })
const chunks = ['event: greeting\ndata: hel', 'lo\nid: 1\n\n', 'data: bye\n\n']
const events: SseEvent[] = []
for (const chunk of chunks) {
  events.push(...parser.feed(Buffer.from(chunk)))
}
const discarded: boolean = parser.finish()
const retry: number | null = parser.retry
const lastId: string = parser.lastEventId

for (const e of events) {
  const event: string = e.event
  const data: string = e.data
  const id: string = e.id
  console.log(`${event} #${id}: ${data}`)
}
console.log({ discarded, retry, lastId })

try {
  parser.feed('not bytes' as unknown as Uint8Array)
} catch (err) {
  if (err instanceof FerroloopError) {
    const code: string = err.code
    const status: number | null = err.status
    console.log(code, status, err.requestId, err instanceof InternalError)
  }
}
