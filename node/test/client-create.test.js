'use strict'
// `create()` is the non-streaming call: it sends `stream: false` whatever the request says (a
// `stream: true` got an event stream back, which create() cannot read), as Python's and C's
// `create` do; `stream()` sends `stream: true` whatever the request says.

const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const ferroloop = require('..')

const request = { model: 'm', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
const events = [
  { type: 'message_start', message: { id: 'msg_s', type: 'message', role: 'assistant', model: 'm', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'streamed' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } },
  { type: 'message_stop' },
]

/** A server answering as the request's `stream` flag asks; `bodies` collects the requests. */
async function serve() {
  const bodies = []
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (chunk) => chunks.push(chunk))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString())
      bodies.push(body)
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.end(events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join(''))
      } else {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ id: 'msg_j', type: 'message', content: [{ type: 'text', text: 'json' }] }))
      }
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const close = () =>
    new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return { url: `http://127.0.0.1:${server.address().port}`, bodies, close }
}

test('create() sends stream: false whatever the request says; stream() sends stream: true', async () => {
  const server = await serve()
  try {
    const client = new ferroloop.Client({ apiKey: 'k', baseUrl: server.url, fromEnv: false, maxRetries: 0 })
    for (const stream of [true, false, undefined]) {
      const response = await client.create({ ...request, stream })
      assert.equal(response.id, 'msg_j', `create() with stream: ${stream}`)
      assert.equal(server.bodies.at(-1).stream, false, `create() with stream: ${stream} sent`)
    }
    const message = await client.stream({ ...request, stream: false }).message()
    assert.equal(message.content[0].text, 'streamed')
    assert.equal(server.bodies.at(-1).stream, true)
  } finally {
    await server.close()
  }
})

test('create() on a 200 whose JSON is not an object is a ProtocolError, as in Python and C', async () => {
  // A generation answer is an object; `[1, 2]` used to resolve as the answer.
  for (const text of ['[1, 2]', '"text"', 'null']) {
    const server = http.createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'request-id': 'req_arr' })
        res.end(text)
      })
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const client = new ferroloop.Client({ apiKey: 'k', baseUrl: `http://127.0.0.1:${server.address().port}`, fromEnv: false, maxRetries: 0 })
      await assert.rejects(
        client.create(request),
        (err) => err instanceof ferroloop.ProtocolError && err.code === 'protocol' && /not a JSON object/.test(err.message) && err.requestId === 'req_arr',
        text,
      )
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(() => resolve()))
    }
  }
})
