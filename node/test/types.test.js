'use strict'
// The values the API hands out match the types lib/index.d.ts declares for them, field by field:
// the events of agent runs (AgentEvent, AgentStopEvent), of streaming turns (TurnEvent,
// ToolResult), of client streams (StreamEvent, RequestMetrics), SSE events, token counts and
// request estimates. The declarations are hand-written; these checks (helpers.js
// `assertDeclared`: every field declared, none missing, each of its declared type) keep them true.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const ferroloop = require('..')
const { repoRoot, sseFixtures, assertDeclared, declaredMemberType, declaredTypes, memberLabels } = require('./helpers.js')
const { startServer, serveScript, anthropicEvents } = require('./replay.js')

const { Agent, Client, ToolExecutor } = ferroloop
const workspace = path.join(repoRoot, 'node', 'lib')

const overloaded = { status: 529, headers: { 'retry-after-ms': '1' }, body: { json: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } } }
const overloadedEventFirst = { body: { events: [{ event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }] } }
const respond = (content, options) => ({ body: { events: anthropicEvents(content, options) } })
const text = (t) => ({ type: 'text', text: t })
const toolUse = (id, name, input = {}) => ({ type: 'tool_use', id, name, input })

/** A JS tool set for the runs: echo (safe), report (progress), explode (throws), slow (times out). */
function tools() {
  return new ToolExecutor()
    .tool({ name: 'echo', concurrencySafe: true }, async (input) => `echo ${input.n}`)
    .tool({ name: 'report', concurrencySafe: true }, (_input, ctx) => {
      ctx.progress({ step: 'half', done: 0.5 })
      return 'reported'
    })
    .tool({ name: 'explode' }, () => {
      throw new Error('kaboom')
    })
    .tool({ name: 'slow', timeoutMs: 20 }, (_input, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('late'))))
}

/**
 * The runs whose events are checked: each is `{ name, server, agent, prompt?, options?,
 * client? }` (`server` starts the replay server; `agent` the Agent options). Together they make
 * every AgentEvent member and every stop reason a Node run can reach; most repeat a scenario of
 * agent.test.js.
 */
function agentRuns() {
  const script = (responses, extra) => () => serveScript({ responses, ...extra })
  const cachedToolTurn = anthropicEvents([toolUse('toolu_c', 'echo', { n: 1 })], { stopReason: 'tool_use' })
  cachedToolTurn[0].data.message.usage.cache_read_input_tokens = 40000
  const longConversation = [
    { role: 'user', content: 'a long conversation' },
    { role: 'assistant', content: 'went on and on' },
    { role: 'user', content: 'write a haiku' },
  ]
  const tooLong = { status: 400, body: { json: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } } } }
  const unauthorized = { status: 401, body: { json: { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } } } }
  const chat = (fields, extra = {}) => ({ data: { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 0, model: 'replay', choices: fields === null ? [] : [{ index: 0, delta: fields, finish_reason: null }], ...extra } })
  return [
    {
      name: 'built-in tools (the replay conversation)',
      server: () => startServer(['--agent-model']),
      agent: { model: 'ferroloop-replay', tools: ['read', 'glob', 'grep'], workspace },
    },
    {
      name: 'built-in tools over the Responses API (the replay conversation)',
      server: () => startServer(['--agent-model', '--agent-model-provider', 'openai-responses']),
      client: { provider: 'openai-responses' },
      agent: { model: 'gpt-5', tools: ['read', 'glob', 'grep'], workspace },
    },
    {
      name: 'built-in tools over Chat Completions (the replay conversation)',
      server: () => startServer(['--agent-model', '--agent-model-provider', 'openai-chat']),
      client: { provider: 'openai-chat' },
      agent: { model: 'gpt-5', tools: ['read', 'glob', 'grep'], workspace },
    },
    {
      name: 'thinking, JS tools: progress, a failure, a timeout, an unknown tool; a 529 retried',
      server: script([
        overloaded,
        respond(
          [
            { type: 'thinking', thinking: 'Let me look this up.', signature: 'sig' },
            text('Checking.'),
            toolUse('toolu_1', 'report'),
            toolUse('toolu_2', 'explode'),
            toolUse('toolu_3', 'slow'),
            toolUse('toolu_4', 'missing'),
          ],
          { stopReason: 'tool_use' },
        ),
        respond([text('Done.')]),
      ]),
      agent: { model: 'replay', tools: tools() },
    },
    {
      name: 'repeated 529s: the fallback model',
      server: script([overloadedEventFirst, overloaded, respond([text('From the fallback.')])]),
      agent: { model: 'primary', fallbackModel: 'fallback', fallbackAfter529Retries: 2 },
    },
    {
      name: 'a call failing as overloaded: the fallback model',
      server: script([overloaded, respond([text('From the fallback.')])]),
      client: { maxRetries: 0 },
      agent: { model: 'primary', fallbackModel: 'fallback', fallbackAfter529Retries: 0 },
    },
    {
      name: 'a response cut by max_tokens: asked again with a raised limit',
      server: script([respond([text('Cut')], { stopReason: 'max_tokens' }), respond([text('Whole.')])]),
      agent: { model: 'claude-sonnet-4-5' },
    },
    {
      name: 'a context near the window: compaction (its call retried), then a cache break',
      server: script([
        respond([toolUse('toolu_1', 'echo', { n: 1 })], { stopReason: 'tool_use', usage: { input_tokens: 190000, output_tokens: 20 } }),
        overloadedEventFirst,
        respond([text('The user asked for an echo.')], { usage: { input_tokens: 6000, output_tokens: 300 } }),
        respond([text('done')], { usage: { input_tokens: 1200, output_tokens: 30 } }),
      ]),
      agent: { model: 'm', tools: tools() },
    },
    {
      name: 'a turn refused as too long: reactive compaction',
      server: script([tooLong, respond([text('The user wants a haiku.')]), respond([text('Autumn moon')])]),
      agent: { model: 'm', maxTurns: 1 },
      prompt: null,
      options: { messages: longConversation },
    },
    {
      name: 'old tool results cleared: microcompact',
      server: script([
        respond([toolUse('toolu_a1', 'echo', { n: 1 }), toolUse('toolu_a2', 'echo', { n: 2 })], { stopReason: 'tool_use' }),
        respond([toolUse('toolu_b1', 'echo', { n: 3 })], { stopReason: 'tool_use', usage: { input_tokens: 150000, output_tokens: 5 } }),
        respond([text('done')]),
      ]),
      agent: { model: 'm', tools: tools(), keepRecentToolResults: 0 },
    },
    {
      name: 'the cache read much less than on the previous turn: cache_break',
      server: script([{ body: { events: cachedToolTurn } }, respond([text('done')])]),
      agent: { model: 'm', tools: tools() },
    },
    {
      name: 'an OpenAI Chat server that reports no usage: usage null',
      server: script([
        {
          body: {
            events: [
              chat({ role: 'assistant', content: '' }),
              chat({ content: 'Hello' }),
              { data: { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 0, model: 'replay', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] } },
              { data: '[DONE]' },
            ],
          },
        },
      ]),
      client: { provider: 'openai-chat' },
      agent: { model: 'gpt-test' },
    },
    { name: 'stop: stop_sequence', server: script([respond([text('Up to the')], { stopReason: 'stop_sequence' })]), agent: { model: 'm' } },
    { name: 'stop: refusal', server: script([respond([text('No.')], { stopReason: 'refusal' })]), agent: { model: 'm' } },
    {
      name: 'stop: max_turns',
      server: script([respond([toolUse('toolu_x', 'echo', { n: 0 })], { stopReason: 'tool_use' })], { when_exhausted: 'repeat_last' }),
      agent: { model: 'm', tools: tools(), maxTurns: 1 },
    },
    { name: 'stop: budget', server: script([]), agent: { model: 'm', tokenBudget: 0 } },
    { name: 'stop: aborted', server: script([]), agent: { model: 'm' }, options: { signal: AbortSignal.abort() } },
    {
      name: 'stop: max_tokens (no progress)',
      server: script([respond([], { stopReason: 'max_tokens' }), respond([], { stopReason: 'max_tokens' })]),
      agent: { model: 'claude-sonnet-4-5' },
    },
    {
      name: 'stop: prompt_too_long (nothing to compact)',
      server: script([tooLong]),
      agent: { model: 'm' },
    },
    { name: 'stop: error (a failed call)', server: script([unauthorized]), agent: { model: 'm' } },
    { name: 'stop: error (an invalid conversation)', server: script([]), agent: { model: 'm' }, prompt: null, options: { messages: [{ role: 'assistant', content: 'x' }] } },
  ]
}

test('every event of an agent run is an AgentEvent member with exactly its fields, of their declared types', async () => {
  const declared = memberLabels('AgentEvent')
  assert.ok(declared.length >= 15, `${declared.length} members`)
  const seen = new Set()
  const reasons = new Set()
  const statuses = new Set()
  for (const run of agentRuns()) {
    const server = await run.server()
    try {
      const client = new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1, fromEnv: false, ...run.client })
      const agent = new Agent(client, run.agent)
      const agentRun = agent.run(run.prompt === undefined ? 'go' : run.prompt, run.options)
      const events = []
      for await (const event of agentRun) events.push(event)
      for (const [i, event] of events.entries()) seen.add(assertDeclared(event, 'AgentEvent', `${run.name}: event ${i}`))
      const stop = events.at(-1)
      assertDeclared(await agentRun.result(), declaredMemberType('AgentRun', 'result'), `${run.name}: result()`)
      reasons.add(stop.reason)
      for (const e of events) if (e.type === 'tool_finished') statuses.add(e.status)
      assert.ok(stop.reason !== 'error' || run.name.startsWith('stop: error'), `${run.name}: ${stop.error}`)
    } finally {
      await server.close()
    }
  }
  assert.deepEqual(declared.filter((label) => !seen.has(label)), [], 'every member was produced by some run')
  // Every stop reason StopReason declares.
  const stopReasons = declaredTypes().aliases.get('StopReason').match(/'\w+'/g).map((r) => r.slice(1, -1))
  assert.deepEqual([...reasons].sort(), stopReasons.sort())
  assert.deepEqual([...statuses].sort(), ['failed', 'rejected', 'succeeded', 'timed_out'])
})

test('every event of a streaming turn is a TurnEvent member, every result a ToolResult', async () => {
  const seen = new Set()
  const check = (events, where) => {
    for (const [i, event] of events.entries()) seen.add(assertDeclared(event, 'TurnEvent', `${where}: event ${i}`))
  }
  const ex = new ToolExecutor({ cleanupGraceMs: 40 })
    .tool({ name: 'echo', concurrencySafe: true }, async (input) => `echo ${input.n}`)
    .tool({ name: 'blocks', concurrencySafe: true }, () => [{ type: 'text', text: 'a block' }])
    .tool({ name: 'explode', concurrencySafe: true }, () => {
      throw new Error('kaboom')
    })
    .tool({ name: 'report', concurrencySafe: true }, async (_input, ctx) => {
      ctx.progress({ step: 'started' })
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
      return 'stopped'
    })
    // Ignores the abort past the grace: reported `detached`.
    .tool({ name: 'stubborn', concurrencySafe: true }, () => new Promise(() => {}))
  const uses = [toolUse('a', 'echo', { n: 1 }), toolUse('b', 'blocks'), toolUse('c', 'explode'), toolUse('d', 'missing')]
  const turn = ex.turn()
  turn.submit(...uses)
  turn.seal()
  const events = []
  for await (const event of turn) events.push(event)
  check(events, 'a finished turn')
  assertDeclared(await turn.results(), declaredMemberType('Turn', 'results'), 'turn.results()')
  assertDeclared(await ex.run(uses), declaredMemberType('ToolExecutor', 'run'), 'run()')

  const cancelled = ex.turn()
  cancelled.submit(toolUse('p', 'report'), toolUse('s', 'stubborn'))
  cancelled.seal()
  const later = []
  for await (const event of cancelled) {
    later.push(event)
    if (event.type === 'progress') cancelled.cancel()
  }
  check(later, 'a cancelled turn')
  assert.deepEqual(memberLabels('TurnEvent').filter((label) => !seen.has(label)), [], 'every member was produced')
})

test("a client stream's events are StreamEvent members (retries, a stall notice), its metrics a RequestMetrics", async () => {
  const request = { model: 'replay', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
  const errorBody = (type, message) => ({ json: { type: 'error', error: { type, message } } })
  const hello = respond([{ type: 'thinking', thinking: 'Hm.', signature: 'sig' }, text('Hello there'), toolUse('toolu_1', 'echo', { n: 1 })])
  const cases = [
    {
      provider: 'anthropic',
      responses: [
        { status: 429, headers: { 'retry-after-ms': '5' }, body: errorBody('rate_limit_error', 'slow down') },
        { status: 529, body: errorBody('overloaded_error', 'Overloaded') },
        overloadedEventFirst,
        { ...hello, headers: { 'request-id': 'req_1' }, fault: { kind: 'stall_after', bytes: 300, ms: 150 } },
      ],
    },
    { provider: 'openai-chat', responses: [{ body: { fixture: path.join(repoRoot, 'tests', 'fixtures', 'openai-chat', '173417d55340.sse') } }] },
  ]
  const seen = new Set()
  for (const { provider, responses } of cases) {
    const server = await serveScript({ responses })
    try {
      const client = new Client({ provider, apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1, fromEnv: false, timeouts: { stallNoticeMs: 50 } })
      const stream = client.stream(request)
      let i = 0
      for await (const event of stream) seen.add(assertDeclared(event, 'StreamEvent', `${provider}: event ${i++}`))
      await stream.message()
      assertDeclared(stream.metrics, declaredMemberType('MessageStream', 'metrics'), `${provider}: metrics`)
      assert.notEqual(stream.metrics, null)
    } finally {
      await server.close()
    }
  }
  assert.ok(seen.has('retry') && seen.has('stalled'), [...seen].join(', '))
})

test('SSE events, token counts and request estimates are of their declared types', () => {
  let events = 0
  for (const { name, bytes } of sseFixtures()) {
    const parser = new ferroloop.SseParser()
    const fed = parser.feed(bytes)
    assertDeclared(fed, declaredMemberType('SseParser', 'feed'), name)
    events += fed.length
  }
  assert.ok(events > 10, `${events} SSE events`)
  const estimate = declaredMemberType(null, 'estimateRequest')
  const body = { system: 'Be brief.', tools: [{ name: 'f', input_schema: { type: 'object' } }], messages: [{ role: 'user', content: 'hi' }] }
  assertDeclared(ferroloop.estimateRequest(body), estimate, 'estimateRequest(a Messages body)')
  assertDeclared(ferroloop.estimateRequest({ instructions: 'Be brief.', input: 'hi' }), estimate, 'estimateRequest(a Responses body)')
  const tokens = declaredMemberType('ContextTracker', 'tokens')
  const tracker = new ferroloop.ContextTracker()
  const methods = new Set()
  const count = (where) => {
    const counted = tracker.tokens()
    assertDeclared(counted, tokens, where)
    methods.add(counted.method)
  }
  count('tokens() of an empty tracker')
  tracker.pushMessage({ role: 'user', content: 'hello' })
  count('tokens() estimated')
  tracker.recordUsage({ input_tokens: 12, output_tokens: 3 }, 1)
  count('tokens() from usage')
  tracker.pushMessage({ role: 'assistant', content: 'hi' })
  count('tokens() from usage and an estimate')
  assert.deepEqual([...methods].sort(), ['estimate', 'exact', 'usage+estimate'])
})

test("an agent's toolDefinitions(), the provider's tools of extra.tools included, are of their declared type", () => {
  // The provider's tools come as given (`{ type, name, ...}`, no `input_schema`): they were
  // declared as the agent's own tools' shape, which they are not.
  const client = new Client({ apiKey: 'k', fromEnv: false, baseUrl: 'http://127.0.0.1:9' })
  const ex = new ToolExecutor()
    .tool({ name: 'described', description: 'Does things.', schema: { type: 'object', properties: { a: { type: 'string' } } } }, () => '')
    .tool({ name: 'bare' }, () => '')
  const webSearch = { type: 'web_search_20250305', name: 'web_search', max_uses: 3 }
  const agent = new Agent(client, { model: 'm', tools: [ex, 'read', 'write', 'edit', 'glob', 'grep', 'bash'], workspace, extra: { tools: [webSearch] } })
  const definitions = agent.toolDefinitions()
  assert.equal(definitions.length, 9)
  assert.deepEqual(definitions.at(-1), webSearch)
  assertDeclared(definitions, declaredMemberType('Agent', 'toolDefinitions'), 'toolDefinitions()')
})

test('the checker of declared types (helpers.js) refuses what the declarations do not allow', () => {
  const turnEnd = { type: 'turn_end', turn: 1, stopReason: null }
  assert.equal(assertDeclared(turnEnd, 'AgentEvent'), 'turn_end')
  const refused = [
    [{ ...turnEnd, extra: 1 }, 'AgentEvent', /fields/],
    [{ type: 'turn_end', turn: 1 }, 'AgentEvent', /fields/],
    [{ ...turnEnd, turn: '1' }, 'AgentEvent', /turn: "1" is not number/],
    [{ type: 'turn_ended', turn: 1, stopReason: null }, 'AgentEvent', /no member/],
    // Members that share a `type` are told apart by their other literal fields.
    [{ type: 'context', action: 'microcompact', messagesBefore: 3, messagesAfter: 1, trigger: 'auto' }, 'AgentEvent', /microcompact/],
    [{ type: 'context', action: 'compaction', messagesBefore: 3, messagesAfter: 1, trigger: 'manual' }, 'AgentEvent', /trigger: "manual"/],
    // A string only `(string & {})` admits (room for later versions) is not one this version sends.
    [{ type: 'finished', index: 0, toolUseId: 'a', tool: 't', status: 'exploded', durationMs: 1 }, 'TurnEvent', /status/],
    [{ type: 'result', index: 0, result: { type: 'tool_result', tool_use_id: 'a', content: [{ text: 'x' }], is_error: false } }, 'TurnEvent', /content/],
    [{ type: 'stop', reason: 'end_turn', error: null, errorCode: 'future_code', status: null, requestId: null, retryAfterMs: null, messages: [], turns: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1 }, 'AgentStopEvent', /errorCode/],
  ]
  for (const [value, type, message] of refused) {
    assert.throws(() => assertDeclared(value, type), message, JSON.stringify(value))
  }
  const futureCode = { type: 'stop', reason: 'end_turn', error: null, errorCode: 'future_code', status: null, requestId: null, retryAfterMs: null, messages: [], turns: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1 }
  assert.equal(assertDeclared(futureCode, 'AgentStopEvent', 'stop', { open: true }), 'stop')
})
