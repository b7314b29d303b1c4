'use strict'
// A StreamTruncatedError's `cause` is the breaking failure with every detail a top-level error
// of its kind has (README: 'timeout' "with `which` watchdog fired and `elapsedMs`", 'protocol'
// "with `limit`"). A plain HTTP server stands in for the provider: it stalls after one event,
// or sends an event past the client's 64 MiB cap after one.

const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const ferroloop = require('..')

const request = { model: 'm', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
const messageStart = {
  type: 'message_start',
  message: { id: 'msg_cause', type: 'message', role: 'assistant', model: 'm', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } },
}
const firstEvent = `event: message_start\ndata: ${JSON.stringify(messageStart)}\n\n`

/** Serves `handler(res)` for every request; resolves with `{ url, close }`. */
async function serve(handler) {
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => handler(res))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The error the request's message() rejects with, against a server answering with `handler`. */
async function truncation(handler, options) {
  const server = await serve(handler)
  try {
    const client = new ferroloop.Client({ apiKey: 'k', baseUrl: server.url, fromEnv: false, maxRetries: 0, ...options })
    return await client.stream(request).message().then(
      () => assert.fail('expected a rejection'),
      (err) => err,
    )
  } finally {
    await server.close()
  }
}

const stallAfterOneEvent = (res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  res.write(firstEvent)
}

for (const [timeouts, which, atLeast] of [
  [{ idleMs: 200 }, 'idle', 200],
  [{ totalMs: 300 }, 'total', 300],
]) {
  test(`a timeout mid-stream (${which}): the cause is a TimeoutError with which and elapsedMs`, async () => {
    const err = await truncation(stallAfterOneEvent, { timeouts })
    assert.ok(err instanceof ferroloop.StreamTruncatedError, String(err))
    assert.equal(err.reason, 'timeout')
    assert.ok(err.cause instanceof ferroloop.TimeoutError, String(err.cause))
    assert.equal(err.cause.which, which)
    assert.equal(typeof err.cause.elapsedMs, 'number')
    assert.ok(err.cause.elapsedMs >= atLeast && err.cause.elapsedMs < 10000, String(err.cause.elapsedMs))
  })
}

test('an event over the size cap after the first: the cause is a ProtocolError with its limit', async () => {
  const chunk = Buffer.alloc(1 << 20, 'a')
  const err = await truncation((res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write(firstEvent)
    res.write('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"')
    // 65 MiB, one event: past the client's 64 MiB cap (the stream stops reading at the cap).
    let sent = 0
    const pump = () => {
      while (sent < 65) {
        sent += 1
        if (!res.write(chunk)) return res.once('drain', pump)
      }
      res.end('"}}\n\n')
    }
    pump()
  })
  assert.ok(err instanceof ferroloop.StreamTruncatedError, String(err))
  assert.equal(err.reason, 'protocol')
  assert.ok(err.cause instanceof ferroloop.ProtocolError, String(err.cause))
  assert.equal(err.cause.limit, 64 * 1024 * 1024)
})
