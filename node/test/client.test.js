'use strict'
// Client against the loopback replay server (`ferroloop serve-replay`): streaming and
// non-streaming requests, retries, every scripted fault, typed errors, AbortSignal.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const ferroloop = require('..')
const { fixturesDir, settlesWithin } = require('./helpers.js')
const { serveScript, anthropicEvents, header } = require('./replay.js')

const { Client, FerroloopError } = ferroloop
const request = { model: 'replay', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
const hello = (extra = {}) => ({ body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, world' }]) }, ...extra })
const errorBody = (type, message) => ({ json: { type: 'error', error: { type, message } } })

/** Runs `fn(client, server)` against a server for `responses`, then stops the server. */
async function withServer(responses, clientOptions, fn) {
  const server = await serveScript({ responses }, { log: true })
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1, ...clientOptions })
    return await fn(client, server)
  } finally {
    await server.close()
  }
}

/** The retries `stream` reports as it is read to its end, as `[attempt, status, code, overloaded]`. */
async function retriesOf(stream) {
  const retries = []
  for await (const event of stream) if (event.type === 'retry') retries.push(event)
  return retries.map((r) => [r.attempt, r.status, r.code, r.overloaded])
}

/** The error `promise` rejects with (fails when it resolves). */
async function failure(promise) {
  try {
    await promise
  } catch (err) {
    return err
  }
  assert.fail('expected a rejection')
}

test('a stream yields typed events, then its final message and metrics', async () => {
  await withServer([hello({ headers: { 'request-id': 'req_1' }, chunk_bytes: 7 })], {}, async (client, server) => {
    const stream = client.stream(request)
    const types = []
    let text = ''
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === 'text_delta') text += event.text
    }
    assert.equal(text, 'Hello there, world')
    assert.equal(types[0], 'message_start')
    assert.ok(types.includes('block_stop'))
    const message = await stream.message()
    assert.deepEqual(message.content, [{ type: 'text', text: 'Hello there, world' }])
    assert.equal(message.stop_reason, 'end_turn')
    assert.equal(stream.metrics.requestId, 'req_1')
    assert.equal(stream.metrics.attempts, 1)
    const [sent] = await server.waitForRequests(1)
    assert.equal(JSON.parse(sent.body).stream, true, 'stream: true is set for the caller')
    assert.equal(header(sent, 'x-api-key'), 'test-key')
  })
})

test('a stream is iterated once: a second iterator is refused with InvalidStateError (invalid_state)', async () => {
  await withServer([hello()], {}, async (client) => {
    const stream = client.stream(request)
    let text = ''
    for await (const event of stream) if (event.type === 'text_delta') text += event.text
    assert.equal(text, 'Hello there, world')
    const err = await failure(stream[Symbol.asyncIterator]().next())
    assert.ok(err instanceof ferroloop.InvalidStateError, String(err))
    assert.equal(err.code, 'invalid_state')
  })
})

test('non-ASCII text, escapes and surrogate pairs arrive intact (batches reach JS as UTF-16)', async () => {
  const text = '会话 テキスト 한국어 naïve 🚀✅ "quoted" \\ back\nslash\ttab \u0001'
  await withServer([{ body: { events: anthropicEvents([{ type: 'text', text }]) }, chunk_bytes: 5 }], {}, async (client) => {
    const stream = client.stream(request)
    let streamed = ''
    for await (const event of stream) {
      if (event.type === 'text_delta') streamed += event.text
    }
    assert.equal(streamed, text)
    const message = await stream.message()
    assert.deepEqual(message.content, [{ type: 'text', text }])
  })
})

test('message() alone reads the whole stream (a recorded fixture, dripped in 1-byte pieces)', async () => {
  const fixture = path.join(fixturesDir, 'anthropic', 'tool_use_response.sse')
  await withServer([{ body: { fixture }, chunk_bytes: 1 }], {}, async (client) => {
    const message = await client.stream(request).message()
    const tool = message.content.find((block) => block.type === 'tool_use')
    assert.ok(tool, 'the fixture holds a tool_use block')
    assert.equal(typeof tool.input, 'object')
    assert.ok(fs.existsSync(fixture))
  })
})

test('429 with retry-after, 529, 500 and an overloaded_error as the first event are retried; the retries are reported with their class', async () => {
  const overloadedFirst = { event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }
  const responses = [
    { status: 429, headers: { 'retry-after-ms': '5' }, body: errorBody('rate_limit_error', 'slow down') },
    { status: 529, body: errorBody('overloaded_error', 'Overloaded') },
    { status: 500, body: errorBody('api_error', 'oops') },
    // A 200 whose first event is a transient error: nothing was delivered, so it is retried
    // (it has no status).
    { body: { events: [overloadedFirst] } },
    hello(),
  ]
  await withServer(responses, {}, async (client, server) => {
    const stream = client.stream(request)
    // Each says why it waited, as the agent's `retry` event does: the failure's class, and
    // whether it was an overload (a 529, or an overloaded_error first event without a status).
    assert.deepEqual(
      await retriesOf(stream),
      [
        [2, 429, 'rate_limited', false],
        [3, 529, 'overloaded', true],
        [4, 500, 'server', false],
        [5, null, 'overloaded', true],
      ],
    )
    assert.equal((await stream.message()).content[0].text, 'Hello there, world')
    assert.equal(stream.metrics.attempts, 5)
    assert.equal((await server.waitForRequests(5)).length, 5)
  })
})

test('a stream whose event: lines a proxy stripped is whole, and its overloaded_error first event is retried', async () => {
  // Anthropic names each event twice, in its `event:` line and in its data's `type`; some
  // proxies strip the lines. The client reads the `type` then, as the decoder does: the answer
  // was reported truncated, and the error first event was not retried.
  const unnamed = (events) => events.map(({ data }) => ({ data }))
  const overloadedFirst = { data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }
  const responses = [
    { body: { events: [overloadedFirst] } },
    { body: { events: unnamed(anthropicEvents([{ type: 'text', text: 'Hello there, world' }])) } },
  ]
  await withServer(responses, {}, async (client, server) => {
    const stream = client.stream(request)
    assert.deepEqual(await retriesOf(stream), [[2, null, 'overloaded', true]])
    assert.equal((await stream.message()).content[0].text, 'Hello there, world')
    assert.equal(stream.metrics.attempts, 2)
    assert.notEqual(stream.metrics.timeToFirstTokenMs, null)
    assert.notEqual(stream.metrics.usage, null)
    assert.equal((await server.waitForRequests(2)).length, 2)
  })
})

test('a connection reset before the headers is retried', async () => {
  await withServer([hello({ fault: { kind: 'reset_before_headers' } }), hello()], {}, async (client) => {
    const stream = client.stream(request)
    assert.equal((await stream.message()).content[0].text, 'Hello there, world')
    assert.equal(stream.metrics.attempts, 2)
  })
})

test('errors are typed FerroloopErrors with code, status and request id once retries run out', async () => {
  const cases = [
    // The last column is the error's retryAfterMs: the response's `retry-after` (seconds on the
    // wire) in milliseconds, on a 429, a 529 and a 5xx (a 503's: when to come back) alike.
    [{ status: 429, headers: { 'retry-after-ms': '20' }, body: errorBody('rate_limit_error', 'slow') }, ferroloop.RateLimitedError, 'rate_limited', 429, 20],
    [{ status: 529, headers: { 'retry-after': '3' }, body: errorBody('overloaded_error', 'busy') }, ferroloop.OverloadedError, 'overloaded', 529, 3000],
    [{ status: 401, body: errorBody('authentication_error', 'bad key') }, ferroloop.AuthenticationError, 'authentication', 401, undefined],
    [{ status: 400, body: errorBody('invalid_request_error', 'prompt is too long: 250000 tokens > 200000 maximum') }, ferroloop.PromptTooLongError, 'prompt_too_long', 400, undefined],
    [{ status: 500, body: errorBody('api_error', 'boom') }, ferroloop.ServerError, 'server', 500, undefined],
    [{ status: 503, headers: { 'retry-after': '7' }, body: errorBody('api_error', 'unavailable') }, ferroloop.ServerError, 'server', 503, 7000],
  ]
  for (const [response, Cls, code, status, retryAfterMs] of cases) {
    response.headers = { ...response.headers, 'request-id': `req_${code}` }
    await withServer([response], { maxRetries: 0 }, async (client) => {
      const err = await failure(client.stream(request).message())
      assert.ok(err instanceof Cls, `${code}: ${err}`)
      assert.ok(err instanceof FerroloopError)
      assert.equal(err.code, code)
      assert.equal(err.status, status)
      assert.equal(err.requestId, `req_${code}`)
      assert.equal(err.retryAfterMs, retryAfterMs, `${status}`)
      // The sizes the provider's message names, as Python's PromptTooLongError.tokens / .limit.
      if (code === 'prompt_too_long') {
        assert.equal(err.tokens, 250000)
        assert.equal(err.limit, 200000)
      } else {
        assert.equal(err.tokens, undefined)
      }
    })
  }
})

test('a prompt too long without sizes in its message has tokens and limit null, from create() too', async () => {
  const response = { status: 400, body: errorBody('invalid_request_error', 'prompt is too long') }
  await withServer([response], { maxRetries: 0 }, async (client) => {
    const err = await failure(client.create(request))
    assert.ok(err instanceof ferroloop.PromptTooLongError, String(err))
    assert.equal(err.tokens, null)
    assert.equal(err.limit, null)
  })
})

test('OpenAI insufficient_quota 429: tried once, a QuotaExceededError (no credit: retrying cannot help)', async () => {
  const quota = {
    status: 429,
    headers: { 'retry-after-ms': '5', 'x-request-id': 'req_quota' },
    body: {
      json: {
        error: {
          message: 'You exceeded your current quota, please check your plan and billing details.',
          type: 'insufficient_quota',
          param: null,
          code: 'insufficient_quota',
        },
      },
    },
  }
  const ok = { body: { fixture: 'tests/fixtures/openai-chat/173417d55340.sse' } }
  await withServer([quota, ok], { provider: 'openai-chat' }, async (client, server) => {
    const err = await failure(client.stream({ model: 'gpt-test', messages: [] }).message())
    assert.ok(err instanceof ferroloop.QuotaExceededError, String(err))
    assert.ok(!(err instanceof ferroloop.RateLimitedError))
    assert.deepEqual([err.code, err.status, err.requestId], ['quota_exceeded', 429, 'req_quota'])
    assert.equal(err.errorType, 'insufficient_quota')
    // The log can lag the result: wait for the first request, then a moment for a retry that
    // must not follow.
    await server.waitForRequests(1)
    await new Promise((resolve) => setTimeout(resolve, 50))
    assert.equal(server.requests.length, 1)
  })
})

test('a disconnect mid-stream is a StreamTruncatedError carrying the partial message', async () => {
  await withServer([hello({ fault: { kind: 'disconnect_after', bytes: 400 } })], { maxRetries: 0 }, async (client) => {
    const stream = client.stream(request)
    const seen = []
    const err = await failure(
      (async () => {
        for await (const event of stream) seen.push(event.type)
      })(),
    )
    assert.ok(err instanceof ferroloop.StreamTruncatedError, String(err))
    assert.equal(err.code, 'stream_truncated')
    assert.equal(err.reason, 'connection')
    assert.equal(err.partial.id, 'msg_test', 'the partial message is attached')
    assert.ok(seen.includes('message_start'), 'events before the break were delivered')
    assert.equal(await failure(stream.message()), err, 'message() rejects with the same error')
  })
})

test('a failed stream keeps its metrics: attempts, retries, bytes and timings up to the failure', async () => {
  const refused = [{ status: 503, body: { text: 'busy' } }, { status: 529, body: { text: 'overloaded' } }]
  await withServer([...refused, hello({ fault: { kind: 'disconnect_after', bytes: 400 } })], {}, async (client) => {
    const stream = client.stream(request)
    assert.equal(stream.metrics, null, 'nothing before the end')
    const err = await failure(stream.message())
    assert.equal(err.code, 'stream_truncated')
    const metrics = stream.metrics
    assert.notEqual(metrics, null)
    assert.equal(metrics.attempts, 3)
    assert.equal(metrics.retries, 2)
    assert.ok(metrics.events >= 1 && metrics.bytesReceived >= 400, JSON.stringify(metrics))
    assert.equal(typeof metrics.totalMs, 'number')
    assert.equal(typeof metrics.timeToFirstEventMs, 'number')
    assert.ok(metrics.usage.input_tokens > 0, 'the usage received before the break')
  })
  await withServer([{ status: 400, body: errorBody('invalid_request_error', 'no') }], {}, async (client) => {
    const stream = client.stream(request)
    assert.equal((await failure(stream.message())).status, 400)
    assert.equal(stream.metrics.attempts, 1)
    assert.equal(stream.metrics.events, 0)
    assert.equal(stream.metrics.timeToFirstEventMs, null)
  })
})

test('a stall mid-stream trips the idle watchdog; a stall before any event is a TimeoutError', async () => {
  const timeouts = { idleMs: 200, firstEventMs: 200 }
  await withServer([hello({ fault: { kind: 'stall_after', bytes: 400, ms: 10000 } })], { maxRetries: 0, timeouts }, async (client) => {
    const err = await failure(client.stream(request).message())
    assert.equal(err.code, 'stream_truncated')
    assert.equal(err.reason, 'timeout')
    assert.equal(err.partial.id, 'msg_test')
  })
  await withServer([hello({ fault: { kind: 'stall_after', bytes: 0, ms: 10000 } })], { maxRetries: 0, timeouts }, async (client) => {
    const err = await failure(client.stream(request).message())
    assert.ok(err instanceof ferroloop.TimeoutError, String(err))
    // Which watchdog fired and after how long, as Python's APITimeoutError.which / .elapsed.
    assert.equal(err.which, 'first event')
    assert.ok(err.elapsedMs >= 200 && err.elapsedMs < 5000, String(err.elapsedMs))
  })
})

test('an error event and malformed JSON mid-stream end the stream with typed errors', async () => {
  const start = anthropicEvents([{ type: 'text', text: 'Hello' }]).slice(0, 3)
  const errorEvent = { event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }
  const malformed = { event: 'content_block_delta', data: '{"type": "content_block_delta", "index": 0, "delta": {' }
  await withServer([{ body: { events: [...start, errorEvent] } }], { maxRetries: 0 }, async (client) => {
    const err = await failure(client.stream(request).message())
    assert.equal(err.code, 'stream_truncated')
    assert.equal(err.reason, 'overloaded')
    assert.equal(err.errorType, 'overloaded_error')
  })
  await withServer([{ body: { events: [...start, malformed] } }], { maxRetries: 0 }, async (client) => {
    const err = await failure(client.stream(request).message())
    assert.equal(err.code, 'stream_truncated')
    assert.equal(err.reason, 'protocol')
  })
})

test('AbortSignal aborts a stalled stream promptly with an AbortError', async () => {
  await withServer([hello({ fault: { kind: 'stall_after', bytes: 400, ms: 60000 } })], {}, async (client) => {
    const controller = new AbortController()
    const stream = client.stream(request, { signal: controller.signal })
    const err = await failure(
      (async () => {
        for await (const event of stream) {
          if (event.type === 'message_start') controller.abort(new Error('user cancelled'))
        }
      })(),
    )
    assert.ok(err instanceof ferroloop.AbortError, String(err))
    assert.equal(err.name, 'AbortError')
    assert.equal(err.cause.message, 'user cancelled')
  })
  const client = new Client({ baseUrl: 'http://127.0.0.1:9' })
  const err = await failure(client.stream(request, { signal: AbortSignal.abort() }).message())
  assert.ok(err instanceof ferroloop.AbortError, 'an already aborted signal sends nothing')
  await assert.rejects(client.create(request, { signal: AbortSignal.abort() }), ferroloop.AbortError)
})

test('breaking out of the iteration cancels the request', async () => {
  await withServer([hello({ fault: { kind: 'stall_after', bytes: 400, ms: 60000 } })], {}, async (client) => {
    const stream = client.stream(request)
    for await (const event of stream) if (event.type === 'message_start') break
    await assert.rejects(stream.message(), ferroloop.AbortError)
  })
})

test('breaking out at message_stop keeps the finished answer: message() and metrics still come', async () => {
  // Before, leaving the loop after the end marker was "abandoned before the message completed":
  // the final message is a separate item that comes after message_stop.
  await withServer([hello()], {}, async (client) => {
    const stream = client.stream(request)
    for await (const event of stream) if (event.type === 'message_stop') break
    const message = await stream.message()
    assert.deepEqual(message.content, [{ type: 'text', text: 'Hello there, world' }])
    assert.equal(message.stop_reason, 'end_turn')
    assert.deepEqual(stream.completedMessage, message)
    assert.equal(stream.metrics.attempts, 1)
  })
})

test("closing a stream's iterator before reading cancels the request; the stream was iterated", async () => {
  // An async generator closed before its first next() runs neither its body nor its finally.
  await withServer([hello({ fault: { kind: 'stall_after', bytes: 400, ms: 60000 } })], {}, async (client) => {
    const stream = client.stream(request)
    assert.deepEqual(await stream[Symbol.asyncIterator]().return(), { done: true, value: undefined })
    await assert.rejects(stream.message(), ferroloop.AbortError)
    const err = await failure(stream[Symbol.asyncIterator]().next())
    assert.ok(err instanceof ferroloop.InvalidStateError, String(err))
  })
  // An iterator closed unread while another one reads the stream leaves the reader alone.
  await withServer([hello()], {}, async (client) => {
    const stream = client.stream(request)
    const reader = stream[Symbol.asyncIterator]()
    assert.equal((await reader.next()).value.type, 'message_start')
    await stream[Symbol.asyncIterator]().return()
    for (let item = await reader.next(); !item.done; item = await reader.next()) assert.ok(item.value.type)
    assert.equal((await stream.message()).stop_reason, 'end_turn')
  })
})

test('message() after an iterator was abandoned mid-stream reads the rest itself; that iterator still gets every event', async () => {
  // message() waited for the loop that had started to read the stream to its end: after an
  // iterator was dropped between two next() calls (never return()ed), it never settled.
  await withServer([hello({ chunk_bytes: 7 }), hello({ chunk_bytes: 7 })], {}, async (client) => {
    const expected = []
    for await (const event of client.stream(request)) expected.push(event.type)
    const stream = client.stream(request)
    const abandoned = stream[Symbol.asyncIterator]()
    assert.equal((await abandoned.next()).value.type, 'message_start')
    const message = await settlesWithin(stream.message(), 'message() after an abandoned iterator')
    assert.deepEqual(message.content, [{ type: 'text', text: 'Hello there, world' }])
    assert.equal(stream.metrics.attempts, 1)
    // Taken up again, the iterator goes on where it stopped: message() read the events for it.
    const rest = []
    for (let r = await abandoned.next(); !r.done; r = await abandoned.next()) rest.push(r.value.type)
    assert.deepEqual(['message_start', ...rest], expected)
  })
})

test('message() awaited inside the loop over the stream settles, and the loop still gets every event', async () => {
  // The loop waited for message(), which waited for the loop to read on: neither settled.
  await withServer([hello({ chunk_bytes: 7 })], {}, async (client) => {
    const stream = client.stream(request)
    let text = ''
    let message
    for await (const event of stream) {
      if (event.type === 'message_start') message = await settlesWithin(stream.message(), 'message() inside the loop')
      if (event.type === 'text_delta') text += event.text
    }
    assert.equal(text, 'Hello there, world')
    assert.equal(message.stop_reason, 'end_turn')
  })
  // A request failing after the loop's first event: message() rejects with its error, and the
  // loop gets the events before it, then throws it.
  await withServer([hello({ fault: { kind: 'disconnect_after', bytes: 400 } })], { maxRetries: 0 }, async (client) => {
    const stream = client.stream(request)
    const abandoned = stream[Symbol.asyncIterator]()
    await abandoned.next()
    const err = await failure(settlesWithin(stream.message(), 'message() of a failing request after an abandoned iterator'))
    assert.ok(err instanceof FerroloopError && !(err instanceof ferroloop.AbortError), String(err))
    let thrown
    try {
      for (let r = await abandoned.next(); !r.done; r = await abandoned.next()) assert.ok(r.value.type)
    } catch (e) {
      thrown = e
    }
    assert.equal(thrown, err)
  })
})

test('create() returns the JSON response; errors are typed the same way', async () => {
  const body = { id: 'msg_1', type: 'message', role: 'assistant', content: [{ type: 'text', text: 'Hi!' }], stop_reason: 'end_turn' }
  await withServer([{ status: 529, body: errorBody('overloaded_error', 'busy') }, { body: { json: body } }], {}, async (client, server) => {
    assert.deepEqual(await client.create(request), body)
    const requests = await server.waitForRequests(2)
    assert.equal(JSON.parse(requests[1].body).stream, false, 'create asks for one JSON answer')
  })
  await withServer([{ status: 404, body: errorBody('not_found_error', 'no model') }], {}, async (client) => {
    const err = await failure(client.create(request))
    assert.ok(err instanceof ferroloop.NotFoundError)
    assert.equal(err.status, 404)
  })
})

test('betas that are not flags are refused before anything is sent (they were dropped without a word)', async () => {
  await withServer([], {}, async (client, server) => {
    for (const [betas, why] of [[5, 'it is a number'], [['ok', 123], 'item 1 is a number'], [{ flag: 1 }, 'it is an object']]) {
      assert.throws(() => client.stream({ ...request, betas }), (err) => err instanceof ferroloop.InvalidArgumentError && err.message.endsWith(why), why)
      await assert.rejects(client.create({ ...request, betas }), (err) => err instanceof ferroloop.InvalidArgumentError && err.message.endsWith(why), why)
    }
    assert.equal(server.requests.length, 0)
  })
})

test('betas go in the anthropic-beta header of their request, not in the body', async () => {
  const body = { id: 'msg_1', type: 'message', role: 'assistant', content: [] }
  await withServer([hello(), { body: { json: body } }], { anthropicBeta: ['a-1'] }, async (client, server) => {
    for await (const event of client.stream({ ...request, betas: ['b-2', 'a-1'] })) assert.ok(event.type)
    assert.deepEqual(await client.create({ ...request, betas: 'c-3' }), body)
    const [streamed, created] = await server.waitForRequests(2)
    assert.equal(header(streamed, 'anthropic-beta'), 'a-1,b-2')
    assert.equal(header(created, 'anthropic-beta'), 'a-1,c-3')
    assert.equal(JSON.parse(streamed.body).betas, undefined)
    assert.equal(JSON.parse(created.body).betas, undefined)
  })
})

test('bad options and requests are InvalidArgumentErrors; a refused connection is a ConnectionError', async () => {
  assert.throws(() => new Client({ provider: 'gemini' }), ferroloop.InvalidArgumentError)
  assert.throws(() => new Client({ baseUrl: 'ftp://x' }), ferroloop.InvalidArgumentError)
  assert.throws(() => new Client({ maxRetries: -1 }), ferroloop.InvalidArgumentError)
  const client = new Client({ provider: 'openai-chat', apiKey: 'k', baseUrl: 'http://127.0.0.1:9', maxRetries: 0 })
  assert.equal(client.provider, 'openai-chat')
  assert.equal(client.baseUrl, 'http://127.0.0.1:9')
  assert.throws(() => client.stream('not an object'), ferroloop.InvalidArgumentError)
  const err = await failure(client.stream({ model: 'm', messages: [] }).message())
  assert.ok(err instanceof ferroloop.ConnectionError, String(err))
})

test('headers are a plain object of strings: a Map, an array or a non-string value is refused', async () => {
  // A Map sent no header at all and an array sent headers named `0`, `1`, ...
  const refused = [
    [new Map([['x-a', 'b']]), /plain object/],
    [['x-a'], /plain object/],
    [{ 'x-a': 1 }, /"x-a" must be a string/],
  ]
  if (typeof Headers === 'function') refused.push([new Headers({ 'x-a': 'b' }), /Object\.fromEntries/])
  for (const [headers, message] of refused) {
    assert.throws(() => new Client({ apiKey: 'k', headers }), (err) => err instanceof ferroloop.InvalidArgumentError && message.test(err.message), String(headers))
  }
  await withServer([hello()], { headers: Object.assign(Object.create(null), { 'x-extra': 'yes' }) }, async (client, server) => {
    await client.stream(request).message()
    const [sent] = await server.waitForRequests(1)
    assert.equal(header(sent, 'x-extra'), 'yes')
  })
})

test('retryMaxDelayMs caps the backoff, like Python retry_max_delay', async () => {
  // Without the cap a 10 s base delay waits up to 10 s before the first retry (full jitter).
  const responses = [{ status: 529, body: errorBody('overloaded_error', 'busy') }, hello()]
  await withServer(responses, { retryBaseDelayMs: 10_000, retryMaxDelayMs: 20 }, async (client) => {
    const stream = client.stream(request)
    const retries = []
    for await (const event of stream) if (event.type === 'retry') retries.push(event)
    assert.equal(retries.length, 1)
    assert.ok(retries[0].waitMs <= 20, `waited ${retries[0].waitMs} ms`)
    assert.equal((await stream.message()).content[0].text, 'Hello there, world')
  })
  for (const bad of [-1, Number.NaN, Infinity, 1e300]) {
    assert.throws(() => new Client({ apiKey: 'k', retryMaxDelayMs: bad }), (err) => err.code === 'invalid_argument', String(bad))
  }
})

test('a timeout of 0 is an InvalidArgumentError naming it, like Python; a retry delay of 0 still retries at once', () => {
  // A 0 ms timeout failed every request (totalMs, firstByteMs) or raced the network (the
  // others), where a Node user's 0 usually means "no timeout".
  for (const name of ['connectMs', 'firstByteMs', 'firstEventMs', 'idleMs', 'stallNoticeMs', 'totalMs']) {
    for (const zero of [0, -0]) {
      assert.throws(
        () => new Client({ fromEnv: false, timeouts: { [name]: zero } }),
        (err) => err instanceof ferroloop.InvalidArgumentError && err.message.startsWith(`timeouts.${name} must be above 0`),
        name,
      )
    }
    new Client({ fromEnv: false, timeouts: { [name]: 0.001 } })
    // Above 0 but under a nanosecond, it rounds to 0: the message says so rather than
    // contradicting the value it shows.
    assert.throws(
      () => new Client({ fromEnv: false, timeouts: { [name]: 1e-9 } }),
      (err) => err instanceof ferroloop.InvalidArgumentError && err.message.startsWith(`timeouts.${name} must be above 0 milliseconds, got 1e-9, which is under a nanosecond:`),
      name,
    )
  }
  new Client({ fromEnv: false, retryBaseDelayMs: 0, retryMaxDelayMs: 0 })
})

test('fromEnv: false ignores the environment, like Python from_env=False', () => {
  const saved = { key: process.env.ANTHROPIC_API_KEY, url: process.env.ANTHROPIC_BASE_URL }
  process.env.ANTHROPIC_BASE_URL = 'http://127.0.0.1:9/from-env'
  try {
    assert.equal(new Client().baseUrl, 'http://127.0.0.1:9/from-env')
    assert.equal(new Client({ fromEnv: false }).baseUrl, 'https://api.anthropic.com')
    assert.equal(new Client({ fromEnv: false, baseUrl: 'http://127.0.0.1:9' }).baseUrl, 'http://127.0.0.1:9')
    assert.throws(() => new Client({ fromEnv: 'no' }), (err) => err.code === 'invalid_argument')
  } finally {
    for (const [name, value] of [['ANTHROPIC_API_KEY', saved.key], ['ANTHROPIC_BASE_URL', saved.url]]) {
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
    }
  }
})
