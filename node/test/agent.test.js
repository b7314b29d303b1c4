'use strict'
// Agent against the loopback replay server: the scripted conversation of `ferroloop run`
// (`serve-replay --agent-model`) with built-in and with JS tools, a scripted turn of parallel JS
// tool calls with progress and a failing tool, retries inside a run, and aborting a run.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const ferroloop = require('..')
const { repoRoot, settlesWithin } = require('./helpers.js')
const { startServer, serveScript, anthropicEvents } = require('./replay.js')

const { Agent, Client, ToolExecutor } = ferroloop
const workspace = path.join(repoRoot, 'node', 'lib')

async function withServer(start, fn) {
  const server = await start()
  try {
    return await fn(new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1 }), server)
  } finally {
    await server.close()
  }
}

/** Every event of a run, by type, and the stop event. */
async function collect(run) {
  const events = []
  for await (const event of run) events.push(event)
  const stop = events.at(-1)
  assert.equal(stop.type, 'stop', 'the last event is stop')
  return { events, stop, ofType: (type) => events.filter((e) => e.type === type) }
}

/** Every tool_use in `messages` is answered by exactly one tool_result in the next message. */
function assertPaired(messages) {
  messages.forEach((message, i) => {
    if (message.role !== 'assistant' || !Array.isArray(message.content)) return
    const uses = message.content.filter((b) => b.type === 'tool_use').map((b) => b.id)
    if (uses.length === 0) return
    const results = messages[i + 1].content.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id)
    assert.deepEqual(results, uses)
  })
}

test('the replay conversation runs the built-in tools, several calls in parallel', async () => {
  await withServer(
    () => startServer(['--agent-model']),
    async (client) => {
      const agent = new Agent(client, { model: 'ferroloop-replay', tools: ['read', 'glob', 'grep'], workspace })
      assert.deepEqual(
        agent.toolDefinitions().map((t) => t.name),
        ['glob', 'grep', 'read'],
      )
      const { stop, ofType } = await collect(agent.run('Explore this directory.'))
      assert.equal(stop.reason, 'end_turn')
      assert.equal(stop.turns, 3)
      assert.equal(stop.toolCalls, 5)
      assert.ok(ofType('text_delta').length > 0)
      assert.equal(ofType('tool_started').length, 5)
      const finished = ofType('tool_finished')
      assert.ok(finished.every((e) => e.status === 'succeeded' && typeof e.durationMs === 'number'))
      assert.equal(ofType('usage').length, 3)
      assertPaired(stop.messages)
    },
  )
})

test('JS tools run inside the agent, with progress, answered in request order', async () => {
  await withServer(
    () => startServer(['--agent-model']),
    async (client) => {
      const executor = new ToolExecutor()
      const tool = (name) =>
        executor.tool({ name, concurrencySafe: true }, async (input, ctx) => {
          ctx.progress({ step: 'started', name })
          await new Promise((resolve) => setImmediate(resolve))
          return `${name} result for ${JSON.stringify(input)}`
        })
      tool('glob')
      tool('grep')
      tool('read')
      const agent = new Agent(client, { model: 'ferroloop-replay', tools: executor })
      const { stop, ofType } = await collect(agent.run('Explore this directory.'))
      assert.equal(stop.reason, 'end_turn')
      // The script picks its later calls from the tool results, so the count depends on them.
      assert.ok(stop.toolCalls >= 3, `${stop.toolCalls} tool calls`)
      assert.equal(ofType('tool_started').length, stop.toolCalls)
      const progress = ofType('tool_progress')
      assert.equal(progress.length, stop.toolCalls, 'one progress event per call')
      assert.equal(progress[0].data.step, 'started')
      assertPaired(stop.messages)
      const results = stop.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b) => b.type === 'tool_result')
      assert.ok(results.every((r) => !r.is_error && String(r.content).includes('result for')))
    },
  )
})

test('a scripted turn: parallel JS calls, a retry, a throwing and an unknown tool', async () => {
  const toolTurn = anthropicEvents(
    [
      { type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { key: 'a' } },
      { type: 'tool_use', id: 'toolu_1b', name: 'lookup', input: { key: 'b' } },
      { type: 'tool_use', id: 'toolu_2', name: 'explode', input: {} },
      { type: 'tool_use', id: 'toolu_3', name: 'missing', input: {} },
    ],
    { stopReason: 'tool_use' },
  )
  const answer = anthropicEvents([{ type: 'text', text: 'Done.' }])
  const script = {
    responses: [
      { status: 529, body: { json: { type: 'error', error: { type: 'overloaded_error', message: 'busy' } } } },
      { body: { events: toolTurn } },
      { body: { events: answer } },
    ],
  }
  await withServer(
    () => serveScript(script, { log: true }),
    async (client, server) => {
      // Each lookup waits until both run: they finish only if they run in parallel (otherwise
      // the first one times out and its result is an error).
      let started = 0
      let bothStarted
      const barrier = new Promise((resolve) => {
        bothStarted = resolve
      })
      const executor = new ToolExecutor()
        .tool({ name: 'lookup', concurrencySafe: true, timeoutMs: 10000 }, async (input) => {
          if (++started === 2) bothStarted()
          await barrier
          return `value of ${input.key}`
        })
        .tool({ name: 'explode' }, () => {
          throw new Error('kaboom')
        })
      const agent = new Agent(client, { model: 'replay', system: 'Be brief.', tools: executor, maxTurns: 5 })
      const { stop, ofType } = await collect(agent.run('Look up a.'))
      assert.equal(stop.reason, 'end_turn')
      assert.equal(ofType('retry').length, 1)
      assert.equal(ofType('retry')[0].status, 529)
      assert.equal(typeof ofType('retry')[0].waitMs, 'number')
      const results = stop.messages[2].content
      assert.deepEqual(
        results.map((r) => [r.tool_use_id, r.is_error]),
        [
          ['toolu_1', false],
          ['toolu_1b', false],
          ['toolu_2', true],
          ['toolu_3', true],
        ],
      )
      assert.equal(results[0].content, 'value of a')
      assert.equal(results[1].content, 'value of b')
      assert.match(JSON.stringify(results[2].content), /kaboom/)
      const requests = await server.waitForRequests(3)
      const last = JSON.parse(requests[2].body)
      assert.equal(last.model, 'replay')
      assert.deepEqual(
        last.tools.map((t) => t.name),
        ['explode', 'lookup'],
      )
    },
  )
})

/** Runs an agent whose tool aborts the run (`abort(controller)`) and waits for ctx.signal. */
async function abortedWhileAToolRuns(abort) {
  const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_slow', name: 'slow', input: {} }], { stopReason: 'tool_use' })
  let outcome
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' }),
    async (client) => {
      const controller = new AbortController()
      let sawAbort = null
      const executor = new ToolExecutor().tool({ name: 'slow' }, (_input, ctx) => {
        abort(controller)
        return new Promise((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            sawAbort = ctx.signal.reason
            resolve('stopped')
          })
        })
      })
      const agent = new Agent(client, { model: 'replay', tools: executor })
      const { stop } = await collect(agent.run('Go.', { signal: controller.signal }))
      outcome = { stop, sawAbort }
    },
  )
  return outcome
}

test('aborting a run cancels its running JS tool (ctx.signal) and stops with a valid history', async () => {
  const { stop, sawAbort } = await abortedWhileAToolRuns((controller) => controller.abort())
  assert.equal(stop.reason, 'aborted')
  assert.ok(sawAbort instanceof ferroloop.AbortError, 'the tool saw the abort through ctx.signal')
  assertPaired(stop.messages)
})

test("aborting a run with a reason hands that reason to its tools: ctx.signal.reason.cause, as for executor.run()", async () => {
  const reason = new Error('the user pressed Ctrl-C')
  const { stop, sawAbort } = await abortedWhileAToolRuns((controller) => setTimeout(() => controller.abort(reason), 10))
  assert.equal(stop.reason, 'aborted')
  assert.ok(sawAbort instanceof ferroloop.AbortError, 'the tool saw the abort through ctx.signal')
  assert.equal(sawAbort.cause, reason, 'the tool sees why the run was aborted')
  assertPaired(stop.messages)
})

test('leaving the loop over a run early cancels it: its running JS tool sees ctx.signal abort', async () => {
  const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_slow', name: 'slow', input: {} }], { stopReason: 'tool_use' })
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' }),
    async (client) => {
      let sawAbort
      const aborted = new Promise((resolve) => {
        sawAbort = resolve
      })
      const executor = new ToolExecutor().tool({ name: 'slow' }, (_input, ctx) => {
        return new Promise((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            sawAbort(ctx.signal.reason)
            resolve('stopped')
          })
        })
      })
      const agent = new Agent(client, { model: 'replay', tools: executor })
      const run = agent.run('Go.')
      for await (const event of run) {
        if (event.type === 'tool_started') break
      }
      // Hold the JS thread while the cancel reaches the native loop: a wake-up that starts
      // the call then finds its abort queued with it (the abort was delivered first and lost).
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100)
      let timer
      const reason = await Promise.race([
        aborted,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('the tool kept running after the loop was left')), 10_000)
        }),
      ]).finally(() => clearTimeout(timer))
      assert.ok(reason instanceof ferroloop.AbortError)
      assert.match(String(reason.cause?.message), /left early/, 'the tool is told why')
      const stop = await run.result()
      assert.equal(stop.reason, 'aborted')
      assertPaired(stop.messages)
    },
  )
})

for (const how of ['break', 'return() unread']) {
  test(`leaving a run (${how}) resumes only once its running JS tool has stopped`, async () => {
    // `break` went on at once while the cancelled tool still ran its cleanup (the run was read
    // to its end in the background), where an abort through the signal ends with the stop
    // event only after the tools answered.
    const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_slow', name: 'slow', input: {} }], { stopReason: 'tool_use' })
    await withServer(
      () => serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' }),
      async (client) => {
        const steps = []
        let started
        const running = new Promise((resolve) => {
          started = resolve
        })
        const executor = new ToolExecutor({ cleanupGraceMs: 5000 }).tool({ name: 'slow' }, (_input, ctx) => {
          started()
          return new Promise((resolve) => {
            ctx.signal.addEventListener('abort', () => {
              setTimeout(() => {
                steps.push('tool stopped')
                resolve('stopped')
              }, 300)
            })
          })
        })
        const agent = new Agent(client, { model: 'replay', tools: executor })
        const run = agent.run('Go.')
        if (how === 'break') {
          for await (const event of run) {
            if (event.type === 'tool_started') break
          }
        } else {
          const iterator = run[Symbol.asyncIterator]()
          await running
          await iterator.return()
        }
        steps.push('left')
        assert.deepEqual(steps, ['tool stopped', 'left'])
        const stop = await run.result()
        assert.equal(stop.reason, 'aborted')
        assertPaired(stop.messages)
      },
    )
  })
}

test('maxTurns stops a run that keeps calling tools; result() gives the stop event', async () => {
  const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_x', name: 'noop', input: {} }], { stopReason: 'tool_use' })
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' }),
    async (client) => {
      const executor = new ToolExecutor().tool({ name: 'noop', concurrencySafe: true }, () => 'ok')
      const agent = new Agent(client, { model: 'replay', tools: executor, maxTurns: 2 })
      const stop = await agent.run('Loop.').result()
      assert.equal(stop.reason, 'max_turns')
      assert.equal(stop.turns, 2)
      assertPaired(stop.messages)
    },
  )
})

test('maxTurns 0 and tokenBudget 0 make no request (as Python and `ferroloop run --max-turns 0`)', async () => {
  // A budget of 0 is spent before the first call: before, that call was made all the same.
  await withServer(
    () => serveScript({ responses: [] }, { log: true }),
    async (client, server) => {
      const turns = await new Agent(client, { model: 'replay', maxTurns: 0 }).run('go').result()
      assert.deepEqual([turns.reason, turns.turns, turns.errorCode], ['max_turns', 0, null])
      const budget = await new Agent(client, { model: 'replay', tokenBudget: 0 }).run('go').result()
      assert.deepEqual([budget.reason, budget.turns, budget.errorCode], ['budget', 0, 'token_budget'])
      assert.equal(server.requests.length, 0)
    },
  )
})

test('result() after leaving the events early gives the stop event of the cancelled run', async () => {
  const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_x', name: 'noop', input: {} }], { stopReason: 'tool_use' })
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' }),
    async (client) => {
      const executor = new ToolExecutor().tool({ name: 'noop', concurrencySafe: true }, () => 'ok')
      const agent = new Agent(client, { model: 'replay', tools: executor, maxTurns: 50 })
      const run = agent.run('Loop.')
      for await (const event of run) {
        assert.equal(event.type, 'turn_start')
        break
      }
      let timer
      const stop = await Promise.race([
        run.result(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('result() hung after an early break')), 10_000)
        }),
      ]).finally(() => clearTimeout(timer))
      assert.equal(stop.type, 'stop')
      assert.equal(stop.reason, 'aborted')
      assertPaired(stop.messages)
    },
  )
})

test("closing a run's iterator before reading cancels the run; result() gives its stop", async () => {
  // An async generator closed before its first next() runs neither its body nor its finally:
  // the run went on (its tool ran, the model was asked again) although the loop was left.
  const toolTurn = anthropicEvents([{ type: 'tool_use', id: 'toolu_x', name: 'noop', input: {} }], { stopReason: 'tool_use' })
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' }),
    async (client) => {
      let calls = 0
      const executor = new ToolExecutor().tool({ name: 'noop', concurrencySafe: true }, () => {
        calls++
        return 'ok'
      })
      const agent = new Agent(client, { model: 'replay', tools: executor, maxTurns: 50 })
      const run = agent.run('Loop.')
      assert.deepEqual(await run[Symbol.asyncIterator]().return(), { done: true, value: undefined })
      let timer
      const stop = await Promise.race([
        run.result(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('result() hung after the iterator was closed')), 10_000)
        }),
      ]).finally(() => clearTimeout(timer))
      assert.equal(stop.reason, 'aborted')
      assert.ok(stop.turns <= 1, `the run went on for ${stop.turns} turns`)
      assert.ok(calls <= 1, `the tool ran ${calls} times`)
      assertPaired(stop.messages)
      const err = await run[Symbol.asyncIterator]().next().then(
        () => assert.fail('a second iteration was allowed'),
        (e) => e,
      )
      assert.ok(err instanceof ferroloop.InvalidStateError, String(err))
    },
  )
})

test('concurrencySafe as a function in an agent: decided per call from its input', async () => {
  // Two reads run together (each waits for the other); the write and the call whose predicate
  // throws run alone: nothing else runs while they do.
  const toolTurn = anthropicEvents(
    [
      { type: 'tool_use', id: 'toolu_r1', name: 'fs', input: { op: 'read', path: 'a' } },
      { type: 'tool_use', id: 'toolu_r2', name: 'fs', input: { op: 'read', path: 'b' } },
      { type: 'tool_use', id: 'toolu_w', name: 'fs', input: { op: 'write', path: 'c' } },
      { type: 'tool_use', id: 'toolu_t', name: 'fs', input: { op: 'throw', path: 'd' } },
      { type: 'tool_use', id: 'toolu_r3', name: 'fs', input: { op: 'read', path: 'e' } },
    ],
    { stopReason: 'tool_use' },
  )
  const answer = anthropicEvents([{ type: 'text', text: 'Done.' }])
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }, { body: { events: answer } }] }),
    async (client) => {
      const asked = []
      let running = 0
      const overlaps = []
      let readers = 0
      let bothReading
      const pair = new Promise((resolve) => {
        bothReading = resolve
      })
      const executor = new ToolExecutor().tool(
        {
          name: 'fs',
          concurrencySafe: (input) => {
            asked.push(input.path)
            if (input.op === 'throw') throw new Error('cannot tell')
            return input.op === 'read'
          },
          timeoutMs: 10000,
        },
        async (input) => {
          running++
          overlaps.push([input.path, running])
          if (input.path === 'a' || input.path === 'b') {
            if (++readers === 2) bothReading()
            await pair
          } else {
            await new Promise((resolve) => setTimeout(resolve, 5))
          }
          running--
          return `${input.op} ${input.path}`
        },
      )
      const agent = new Agent(client, { model: 'replay', tools: executor, maxTurns: 3 })
      const { stop } = await collect(agent.run('Go.'))
      assert.equal(stop.reason, 'end_turn')
      assert.deepEqual(asked, ['a', 'b', 'c', 'd', 'e'], 'asked once per call, in order')
      const results = stop.messages[2].content
      assert.deepEqual(
        results.map((r) => [r.tool_use_id, r.is_error, r.content]),
        [
          ['toolu_r1', false, 'read a'],
          ['toolu_r2', false, 'read b'],
          ['toolu_w', false, 'write c'],
          ['toolu_t', false, 'throw d'],
          ['toolu_r3', false, 'read e'],
        ],
      )
      // The reads overlapped; the write, the undecidable call and the read after them ran alone.
      assert.deepEqual(new Map(overlaps), new Map([['a', 1], ['b', 2], ['c', 1], ['d', 1], ['e', 1]]))
      assertPaired(stop.messages)
    },
  )
})

test("an agent's extra betas that are not flags stop the run with an error before any request", async () => {
  // They were dropped without a word: the request went out without the features asked for.
  await withServer(
    () => serveScript({ responses: [] }, { log: true }),
    async (client, server) => {
      const stop = await new Agent(client, { model: 'replay', extra: { betas: ['ok', 5] } }).run('hi').result()
      assert.equal(stop.reason, 'error')
      assert.equal(stop.errorCode, 'invalid_configuration')
      assert.match(stop.error, /betas must be a flag or an array of flags \(strings\): item 1 is a number/)
      assert.equal(server.requests.length, 0)
    },
  )
})

test('an invalid conversation stops the run with an error before any request', async () => {
  await withServer(
    () => serveScript({ responses: [] }, { log: true }),
    async (client, server) => {
      const agent = new Agent(client, { model: 'replay' })
      for (const [messages, expected] of [
        [[5, null], 'message 0 is not an object'],
        [[{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'prefill' }], 'the last message must be a user message'],
        [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_9', content: 'x' }] }], 'answers no tool_use'],
      ]) {
        const { events, stop } = await collect(agent.run(undefined, { messages }))
        assert.equal(events.length, 1)
        assert.equal(stop.reason, 'error')
        assert.match(stop.error, /^invalid conversation: /)
        assert.ok(stop.error.includes(expected), stop.error)
        assert.equal(stop.turns, 0)
      }
      assert.equal(server.requests.length, 0)
    },
  )
})

test('an empty prompt or text block stops the run with an error before any request', async () => {
  await withServer(
    () => serveScript({ responses: [] }, { log: true }),
    async (client, server) => {
      const agent = new Agent(client, { model: 'replay' })
      for (const [prompt, expected] of [
        ['', 'message 0: the content is empty'],
        [[], 'message 0: the content is empty'],
        [[{ type: 'text', text: '' }], 'message 0: text block 0 is empty'],
      ]) {
        const { events, stop } = await collect(agent.run(prompt))
        assert.equal(events.length, 1)
        assert.equal(stop.reason, 'error')
        assert.ok(stop.error.includes(expected), stop.error)
      }
      assert.equal(server.requests.length, 0)
    },
  )
})

test('a paused server-tool turn is continued into one message; refusals stop with reason refusal', async () => {
  const search = (id, query) => [
    { type: 'server_tool_use', id, name: 'web_search', input: { query } },
    { type: 'web_search_tool_result', tool_use_id: id, content: [{ type: 'web_search_result', url: 'https://example.com', title: 'Example', encrypted_content: 'e30=' }] },
  ]
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'text', text: 'Searching.' }, ...search('srvtoolu_1', 'sse')], { stopReason: 'pause_turn' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'Found it.' }], { stopReason: 'end_turn' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'No.' }], { stopReason: 'refusal' }) } },
    ],
  }
  await withServer(
    () => serveScript(script, { log: true }),
    async (client, server) => {
      const webSearch = { type: 'web_search_20250305', name: 'web_search', max_uses: 3 }
      const agent = new Agent(client, { model: 'replay', tools: ['read'], workspace, extra: { tools: [webSearch] } })
      assert.deepEqual(agent.toolDefinitions().map((t) => t.name), ['read', 'web_search'])
      const { stop } = await collect(agent.run('look it up'))
      assert.equal(stop.reason, 'end_turn')
      assert.equal(stop.turns, 2)
      assert.deepEqual(
        stop.messages.map((m) => m.role),
        ['user', 'assistant'],
      )
      assert.deepEqual(
        stop.messages[1].content.map((b) => b.type),
        ['text', 'server_tool_use', 'web_search_tool_result', 'text'],
      )
      const requests = await server.waitForRequests(2)
      const first = JSON.parse(requests[0].body)
      // Last of the tools, so it carries the tools' cache breakpoint.
      assert.deepEqual(first.tools.at(-1), { ...webSearch, cache_control: { type: 'ephemeral' } })
      const second = JSON.parse(requests[1].body)
      assert.equal(second.messages.at(-1).role, 'assistant')
      assert.equal(second.messages.at(-1).content[1].id, 'srvtoolu_1')

      const refused = await collect(agent.run('something else'))
      assert.equal(refused.stop.reason, 'refusal')
    },
  )
})

test('Agent options are validated', () => {
  const client = new Client({ baseUrl: 'http://127.0.0.1:9' })
  assert.throws(() => new Agent({}, { model: 'm' }), ferroloop.InvalidArgumentError)
  assert.throws(() => new Agent(client, {}), ferroloop.InvalidArgumentError)
  assert.throws(() => new Agent(client, { model: 'm', tools: ['rm'] }), ferroloop.InvalidArgumentError)
  assert.throws(() => new Agent(client, { model: 'm', extra: 5 }), ferroloop.InvalidArgumentError)
  // The core's configuration check, before only at a run's start (a stop with
  // `invalid_configuration`; Node refused only `model: ''`), as in Python and C.
  const thinking = { thinking: { type: 'enabled', budget_tokens: 4096 } }
  for (const [options, message] of [
    [{ model: '' }, /^invalid agent configuration: the model name is empty/],
    [{ model: '  \n' }, /^invalid agent configuration: the model name is empty/],
    [{ model: 'm', fallbackModel: '' }, /^invalid agent configuration: the fallback model name is empty/],
    [{ model: 'm', fallbackModel: ' ' }, /^invalid agent configuration: the fallback model name is empty/],
    [{ model: 'm', maxTokens: 4096, extra: thinking }, /^invalid agent configuration: max_tokens \(4096\) must be greater/],
    [{ model: 'm', maxTokens: 1024, extra: thinking }, /^invalid agent configuration: max_tokens \(1024\) must be greater/],
    [{ model: 'm', maxTokens: 0 }, /^invalid agent configuration: max_tokens is 0/],
  ]) {
    assert.throws(
      () => new Agent(client, options),
      (err) => err instanceof ferroloop.InvalidArgumentError && message.test(err.message),
      JSON.stringify(options),
    )
  }
  assert.doesNotThrow(() => new Agent(client, { model: 'm', maxTokens: 4097, extra: thinking }))
  // The tools' check too (the core's Agent::check_tools, before only at a run's start, a stop
  // with `invalid_tool_definition`): a name the providers refuse, a tool_choice naming no tool.
  for (const [options, message] of [
    [{ model: 'm', tools: new ToolExecutor().tool({ name: 'read file' }, () => '') }, /^invalid agent configuration: tool "read file": a tool name/],
    [{ model: 'm', tools: ['read'], extra: { tool_choice: { type: 'tool', name: 'write' } } }, /^invalid agent configuration: .*tool_choice/],
  ]) {
    assert.throws(
      () => new Agent(client, options),
      (err) => err instanceof ferroloop.InvalidArgumentError && message.test(err.message),
      String(message),
    )
  }
  const agent = new Agent(client, { model: 'm', tools: ['read', new ToolExecutor().tool({ name: 'x' }, () => '')] })
  assert.deepEqual(
    agent.toolDefinitions().map((t) => t.name),
    ['read', 'x'],
  )
  assert.throws(() => agent.run(42), ferroloop.InvalidArgumentError)
  // With `messages` too (it started a run whose only event was an invalid_history stop), as
  // Python's TypeError; a null or absent prompt there means none.
  const history = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yes' }]
  for (const prompt of [42, { type: 'text', text: 'an object, not an array' }]) {
    assert.throws(
      () => agent.run(prompt, { messages: history }),
      (err) => err instanceof ferroloop.InvalidArgumentError && /the prompt must be a string or an array/.test(err.message),
      String(prompt),
    )
  }
  agent.run(null, { messages: [...history, { role: 'user', content: 'go on' }] }).abort()
  agent.run('go', { messages: null, signal: null }).abort()
})

test('an agent is garbage once it and its runs are dropped (its wake function holds no reference to it)', async () => {
  const v8 = require('node:v8')
  const vm = require('node:vm')
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc')
  await withServer(
    () => startServer(['--agent-model']),
    async (client) => {
      const executor = new ToolExecutor()
      for (const name of ['glob', 'grep', 'read']) {
        executor.tool({ name, concurrencySafe: true }, async () => {
          // Collect while the run goes on: the run alone must keep its agent's tools reachable.
          gc()
          return `${name} result`
        })
      }
      // Only the run refers to its agent once this returns.
      const start = () => {
        const agent = new Agent(client, { model: 'ferroloop-replay', tools: executor })
        return [agent.run('Explore.'), new WeakRef(agent)]
      }
      let [run, ran] = start()
      const { stop } = await collect(run)
      assert.ok(stop.toolCalls >= 3, `the JS tools ran (${stop.toolCalls} calls)`)
      run = null
      const idle = new WeakRef(new Agent(client, { model: 'm', tools: executor }))
      for (let i = 0; i < 40 && (ran.deref() !== undefined || idle.deref() !== undefined); i++) {
        await new Promise(setImmediate)
        gc()
      }
      assert.equal(ran.deref(), undefined, 'the agent was collected after its run')
      assert.equal(idle.deref(), undefined, 'an agent that never ran was collected')
    },
  )
})

test('a JS tool declared with a description offers it to the model, like Python tools', () => {
  // The model learns what a tool does from its definition: without the description a JS tool
  // was offered as a bare name and schema (Python's `description=` always reached the model).
  const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
  const tools = new ToolExecutor()
    .tool({ name: 'weather', description: 'Current weather for a city.', schema }, () => 'Sunny')
    .tool({ name: 'plain' }, () => 'ok')
  const agent = new Agent(new Client({ apiKey: 'test-key', baseUrl: 'http://127.0.0.1:9' }), { model: 'm', tools })
  const byName = Object.fromEntries(agent.toolDefinitions().map((t) => [t.name, t]))
  assert.deepEqual(byName.weather, { name: 'weather', description: 'Current weather for a city.', input_schema: schema })
  assert.equal('description' in byName.plain, false, 'no description: the field is left out')
  assert.throws(
    () => new ToolExecutor().tool({ name: 'bad', description: 42 }, () => ''),
    (err) => err.code === 'invalid_argument',
  )
})

test("toolNames: an executor's tools in registration order, an agent's sorted, as in Python", () => {
  // Python's ToolExecutor.tool_names and Agent.tool_names; Node had neither.
  const ex = new ToolExecutor().tool({ name: 'zeta' }, () => 'z').tool({ name: 'alpha' }, () => 'a')
  assert.deepEqual(ex.toolNames, ['zeta', 'alpha'])
  const client = new Client({ apiKey: 'k', fromEnv: false, baseUrl: 'http://127.0.0.1:9' })
  const webSearch = { type: 'web_search_20250305', name: 'web_search' }
  const agent = new Agent(client, { model: 'm', tools: [ex, 'read'], workspace, extra: { tools: [webSearch] } })
  // The tools the agent runs (not the provider's own, which only toolDefinitions() lists).
  assert.deepEqual(agent.toolNames, ['alpha', 'read', 'zeta'])
  assert.deepEqual(new Agent(client, { model: 'm' }).toolNames, [])
})

test("an agent's tool gets ctx.index, its call's position in the turn, as in Python", async () => {
  const toolTurn = anthropicEvents(
    [
      { type: 'tool_use', id: 'a1', name: 'where', input: {} },
      { type: 'tool_use', id: 'a2', name: 'where', input: {} },
    ],
    { stopReason: 'tool_use' },
  )
  const done = anthropicEvents([{ type: 'text', text: 'ok' }], { stopReason: 'end_turn' })
  const seen = {}
  await withServer(
    () => serveScript({ responses: [{ body: { events: toolTurn } }, { body: { events: done } }] }),
    async (client) => {
      const ex = new ToolExecutor().tool({ name: 'where', concurrencySafe: true }, (input, ctx) => {
        seen[ctx.toolUseId] = ctx.index
        return 'here'
      })
      const { stop } = await collect(new Agent(client, { model: 'm', tools: ex }).run('go'))
      assert.equal(stop.reason, 'end_turn')
    },
  )
  assert.deepEqual(seen, { a1: 0, a2: 1 })
})

test('fallbackModel takes over after repeated 529s: a model_fallback event, later requests name it (as in Python)', async () => {
  const overloaded = { status: 529, headers: { 'retry-after-ms': '1' }, body: { json: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } } }
  // An `overloaded_error` as the first event of a 200 (retried by the client, without a
  // status) counts as a 529, and its `retry` event says it was an overload (`code`, `overloaded`).
  const overloadedEventFirst = { body: { events: [{ event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }] } }
  // The fallback's `error` says which overloads it counted.
  const cases = [
    [overloaded, 529, '2 consecutive HTTP 529 responses'],
    [overloadedEventFirst, null, '2 consecutive overloaded responses (1 HTTP 529, 1 overloaded error without one)'],
  ]
  for (const [first, status, error] of cases) {
    const script = { responses: [first, overloaded, { body: { events: anthropicEvents([{ type: 'text', text: 'From the fallback.' }]) } }] }
    await withServer(
      () => serveScript(script, { log: true }),
      async (client, server) => {
        const agent = new Agent(client, { model: 'claude-primary', fallbackModel: 'claude-fallback', fallbackAfter529Retries: 2 })
        const { stop, ofType } = await collect(agent.run('hi'))
        assert.equal(stop.reason, 'end_turn', stop.error)
        const fallbacks = ofType('model_fallback')
        assert.equal(fallbacks.length, 1)
        assert.equal(fallbacks[0].call, 'turn')
        assert.equal(fallbacks[0].from, 'claude-primary')
        assert.equal(fallbacks[0].to, 'claude-fallback')
        assert.equal(fallbacks[0].reason, 'repeated_529')
        assert.equal(fallbacks[0].error, error)
        assert.deepEqual(
          ofType('retry').map((r) => [r.status, r.code, r.overloaded]),
          [[status, 'overloaded', true]],
        )
        const requests = await server.waitForRequests(3)
        assert.deepEqual(
          requests.map((r) => JSON.parse(r.body).model),
          ['claude-primary', 'claude-primary', 'claude-fallback'],
        )
      },
    )
  }
  const client = new Client({ baseUrl: 'http://127.0.0.1:9' })
  assert.throws(() => new Agent(client, { model: 'm', fallbackModel: 5 }), ferroloop.InvalidArgumentError)
  assert.throws(() => new Agent(client, { model: 'm', fallbackAfter529Retries: -1 }), ferroloop.InvalidArgumentError)
})

test('an overload announced mid-stream asks the turn again of the same model without a fallback (as in Python)', async () => {
  // The client cannot retry an `overloaded_error` event after the response started; without a
  // fallback model the loop discards the partial turn and asks it again under its number
  // (before, the run stopped with `overloaded`).
  const full = anthropicEvents([{ type: 'text', text: 'Partial answer.' }])
  const partial = full.slice(0, full.findIndex((e) => e.event === 'content_block_stop'))
  partial.push({ event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } })
  const script = { responses: [{ body: { events: partial } }, { body: { events: anthropicEvents([{ type: 'text', text: 'Second try.' }]) } }] }
  await withServer(
    () => serveScript(script, { log: true }),
    async (client, server) => {
      const { stop, ofType } = await collect(new Agent(client, { model: 'm' }).run('go'))
      assert.equal(stop.reason, 'end_turn', stop.error)
      assert.equal(stop.turns, 1)
      assert.deepEqual(ofType('turn_start').map((e) => e.turn), [1, 1])
      assert.ok(!JSON.stringify(stop.messages).includes('Partial'))
      assert.equal(stop.messages.at(-1).content[0].text, 'Second try.')
      assert.equal(ofType('usage').length, 2)
      const requests = await server.waitForRequests(2)
      assert.deepEqual(requests.map((r) => JSON.parse(r.body).model), ['m', 'm'])
    },
  )
})

test('a switch to the fallback model is no cache_break (as in Python)', async () => {
  // The prompt cache is the model's: the fallback's first call reads none of the primary's,
  // which was reported as a `cache_break` (40000 -> 0, nothing in the prompt changed).
  const overloaded = { status: 529, headers: { 'retry-after-ms': '1' }, body: { json: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } } }
  const first = anthropicEvents([{ type: 'tool_use', id: 'toolu_1', name: 'echo', input: { n: 1 } }], { stopReason: 'tool_use' })
  first[0].data.message.usage.cache_read_input_tokens = 40000
  const script = {
    responses: [{ body: { events: first } }, overloaded, { body: { events: anthropicEvents([{ type: 'text', text: 'From the fallback.' }]) } }],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      const executor = new ToolExecutor()
      executor.tool({ name: 'echo', concurrencySafe: true }, async (input) => `echo ${input.n}`)
      const agent = new Agent(client, { model: 'claude-primary', tools: executor, fallbackModel: 'claude-fallback', fallbackAfter529Retries: 1 })
      const { events, stop } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn', stop.error)
      assert.deepEqual(events.filter((e) => e.type === 'model_fallback' || e.type === 'cache_break').map((e) => e.type), ['model_fallback'])
    },
  )
})

test('a turn refused as too long is asked again as the same turn after the compaction (as in Python)', async () => {
  // Its `turn_start` repeats the number and it counts once toward `maxTurns` (with 1, the run
  // stopped with `max_turns` before asking it again).
  const tooLong = { status: 400, body: { json: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } } } }
  const script = {
    responses: [
      tooLong,
      { body: { events: anthropicEvents([{ type: 'text', text: 'The user wants a haiku.' }]) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'Autumn moon' }]) } },
    ],
  }
  const messages = [
    { role: 'user', content: 'a long conversation' },
    { role: 'assistant', content: 'went on and on' },
    { role: 'user', content: 'write a haiku' },
  ]
  await withServer(
    () => serveScript(script),
    async (client) => {
      const agent = new Agent(client, { model: 'm', maxTurns: 1 })
      const { stop, ofType } = await collect(agent.run(null, { messages }))
      assert.deepEqual([stop.reason, stop.turns], ['end_turn', 1], stop.error)
      assert.deepEqual(ofType('turn_start').map((e) => e.turn), [1, 1])
      assert.deepEqual(ofType('context').map((e) => e.trigger), ['reactive'])
    },
  )
})

test("the stop's toolCalls counts the tool_finished events, a call discarded with its response too (as in Python)", async () => {
  // A safe call starts as soon as it is sealed; the response is then cut by `max_tokens` and
  // asked again with a raised limit, which discards the call. It had its `tool_finished`
  // event, and `toolCalls` counts it (it counted only the kept turns' calls).
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'tool_use', id: 'toolu_cut', name: 'echo', input: { n: 1 } }], { stopReason: 'max_tokens' }) } },
      { body: { events: anthropicEvents([{ type: 'tool_use', id: 'toolu_kept', name: 'echo', input: { n: 2 } }], { stopReason: 'tool_use' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'done' }]) } },
    ],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      const executor = new ToolExecutor()
      executor.tool({ name: 'echo', concurrencySafe: true }, async (input) => `echo ${input.n}`)
      const agent = new Agent(client, { model: 'claude-sonnet-4-5', tools: executor })
      const { stop, ofType } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn', stop.error)
      const finished = ofType('tool_finished').map((e) => e.toolUseId)
      assert.deepEqual(finished, ['toolu_cut', 'toolu_kept'])
      assert.equal(stop.toolCalls, finished.length)
    },
  )
})

test('a turn cut by max_tokens is asked again with a raised limit: a max_tokens_raised event (as in Python)', async () => {
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'text', text: 'Cut' }], { stopReason: 'max_tokens' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'Whole.' }]) } },
    ],
  }
  for (const [option, raised] of [[undefined, 64000], [20000, 20000], [0, null]]) {
    await withServer(
      () => serveScript(script, { log: true }),
      async (client, server) => {
        const agent = new Agent(client, { model: 'claude-sonnet-4-5', escalatedMaxTokens: option })
        const { stop, ofType } = await collect(agent.run('write a lot'))
        assert.equal(stop.reason, 'end_turn', stop.error)
        const bodies = (await server.waitForRequests(2)).map((r) => JSON.parse(r.body))
        assert.deepEqual(bodies.map((b) => b.max_tokens), [8192, raised ?? 8192], `${option}`)
        if (raised === null) {
          assert.deepEqual(ofType('max_tokens_raised'), [])
          assert.match(JSON.stringify(bodies[1].messages), /Resume directly/)
        } else {
          assert.deepEqual(ofType('max_tokens_raised'), [{ type: 'max_tokens_raised', turn: 1, from: 8192, to: raised }])
          assert.deepEqual(bodies[0].messages, bodies[1].messages)
        }
      },
    )
  }
  const client = new Client({ baseUrl: 'http://127.0.0.1:9' })
  for (const n of [-1, 1.5, Infinity, 'big']) {
    assert.throws(() => new Agent(client, { model: 'm', escalatedMaxTokens: n }), ferroloop.InvalidArgumentError, `${n}`)
  }
})

test("a compaction call has a usage event of its own, call 'compaction' (as in Python)", async () => {
  // The first turn reports a context near the window, so the loop compacts before the second.
  // The summary call is answered first with an `overloaded_error` event (no status): the
  // client retries it, and the `retry` event says it is the compaction call's (`call`) and why.
  const overloadedEventFirst = { body: { events: [{ event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }] } }
  const response = (content, stopReason, inputTokens, outputTokens) => ({
    body: { events: anthropicEvents(content, { stopReason, usage: { input_tokens: inputTokens, output_tokens: outputTokens } }) },
  })
  const script = {
    responses: [
      response([{ type: 'tool_use', id: 'toolu_1', name: 'echo', input: { n: 1 } }], 'tool_use', 190000, 20),
      overloadedEventFirst,
      response([{ type: 'text', text: 'The user asked for an echo.' }], 'end_turn', 6000, 300),
      response([{ type: 'text', text: 'done' }], 'end_turn', 1200, 30),
    ],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      const executor = new ToolExecutor()
      executor.tool({ name: 'echo', concurrencySafe: true }, async (input) => `echo ${input.n}`)
      const agent = new Agent(client, { model: 'm', tools: executor })
      const { events, stop, ofType } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn', stop.error)
      const usages = ofType('usage')
      assert.deepEqual(
        usages.map((e) => [e.call, e.turn, e.usage.input_tokens]),
        [['turn', 1, 190000], ['compaction', 2, 6000], ['turn', 2, 1200]],
      )
      const summary = usages[1]
      assert.ok(summary.estimatedInputTokens > 0)
      assert.ok(summary.timeToFirstTokenMs === null || summary.timeToFirstTokenMs >= 0)
      // Before the compaction's context event.
      const order = events.filter((e) => e.type === 'usage' || e.type === 'context').map((e) => (e.type === 'usage' ? e.call : e.action))
      assert.deepEqual(order, ['turn', 'compaction', 'compaction', 'turn'])
      assert.deepEqual(
        ofType('retry').map((r) => [r.call, r.attempt, r.status, r.code, r.overloaded]),
        [['compaction', 2, null, 'overloaded', true]],
      )
      // Before the summary call's usage event.
      assert.ok(events.indexOf(ofType('retry')[0]) < events.indexOf(summary))
      const input = usages.reduce((n, e) => n + e.usage.input_tokens + (e.usage.cache_creation_input_tokens ?? 0) + (e.usage.cache_read_input_tokens ?? 0), 0)
      const output = usages.reduce((n, e) => n + e.usage.output_tokens, 0)
      assert.deepEqual([input, output], [stop.inputTokens, stop.outputTokens])
      assert.deepEqual([input, output], [197200, 350])
    },
  )
})

test('an overloaded compaction call falls back as a turn\'s does: model_fallback before the context event (as in Python)', async () => {
  // The summary call is answered with an overload (an `overloaded_error` event first in a
  // 200): with `fallbackAfter529Retries: 1` it switches to the fallback at once, and the summary
  // and the rest of the run are the fallback's.
  const overloadedEventFirst = { body: { events: [{ event: 'error', data: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }] } }
  const response = (content, stopReason, inputTokens, outputTokens) => ({
    body: { events: anthropicEvents(content, { stopReason, usage: { input_tokens: inputTokens, output_tokens: outputTokens } }) },
  })
  const script = {
    responses: [
      response([{ type: 'tool_use', id: 'toolu_1', name: 'echo', input: { n: 1 } }], 'tool_use', 190000, 20),
      overloadedEventFirst,
      response([{ type: 'text', text: 'The user asked for an echo.' }], 'end_turn', 6000, 300),
      response([{ type: 'text', text: 'done' }], 'end_turn', 1200, 30),
    ],
  }
  await withServer(
    () => serveScript(script, { log: true }),
    async (client, server) => {
      const executor = new ToolExecutor()
      executor.tool({ name: 'echo', concurrencySafe: true }, async (input) => `echo ${input.n}`)
      const agent = new Agent(client, { model: 'primary', tools: executor, fallbackModel: 'fallback', fallbackAfter529Retries: 1 })
      const { events, stop, ofType } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn', stop.error)
      const kinds = events.filter((e) => ['usage', 'context', 'retry', 'model_fallback'].includes(e.type)).map((e) => e.type)
      assert.deepEqual(kinds, ['usage', 'model_fallback', 'usage', 'context', 'usage'])
      const [fallback] = ofType('model_fallback')
      assert.deepEqual([fallback.call, fallback.from, fallback.to, fallback.reason], ['compaction', 'primary', 'fallback', 'repeated_529'])
      const models = (await server.waitForRequests(4)).map((r) => JSON.parse(r.body).model)
      assert.deepEqual(models, ['primary', 'primary', 'fallback', 'fallback'])
    },
  )
})

test("ctx.progress in an agent's tool throws InvalidArgumentError for a value JSON cannot carry", async () => {
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'tool_use', id: 'toolu_1', name: 'report', input: {} }], { stopReason: 'tool_use' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'ok' }]) } },
    ],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      let thrown
      const executor = new ToolExecutor().tool({ name: 'report' }, (_input, ctx) => {
        try {
          ctx.progress(10n)
        } catch (err) {
          thrown = err
        }
        return 'done'
      })
      const agent = new Agent(client, { model: 'm', tools: executor })
      const { stop } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn')
      assert.ok(thrown instanceof ferroloop.InvalidArgumentError, `${thrown}`)
      assert.match(thrown.message, /ctx\.progress/)
    },
  )
})

test("an agent's tool answering with a lone surrogate gets U+FFFD in its result, and the process goes on", { timeout: 20_000 }, async () => {
  // A text cut in the middle of an emoji: JSON.stringify wrote its lone half as an escape the
  // native layer refused, thrown from a microtask (the process ended).
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'tool_use', id: 'toolu_1', name: 'read', input: {} }], { stopReason: 'tool_use' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'ok' }]) } },
    ],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      const cut = 'emoji 😀 cut'.slice(0, 7)
      const executor = new ToolExecutor().tool({ name: 'read' }, (_input, ctx) => {
        ctx.progress({ partial: cut })
        return cut
      })
      const agent = new Agent(client, { model: 'm', tools: executor })
      const { stop, ofType } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn')
      assert.deepEqual(ofType('tool_progress').map((e) => e.data), [{ partial: 'emoji \ufffd' }])
      const [result] = stop.messages.at(-2).content
      assert.deepEqual([result.content, result.is_error], ['emoji \ufffd', false])
    },
  )
})

test("an agent's tool timed out by the executor's defaultTimeoutMs sees a TimeoutError, as with its own timeoutMs", async () => {
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'tool_use', id: 'toolu_1', name: 'wait', input: {} }], { stopReason: 'tool_use' }) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'ok' }]) } },
    ],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      let reason
      const executor = new ToolExecutor({ defaultTimeoutMs: 40, cleanupGraceMs: 100 }).tool({ name: 'wait' }, (_input, ctx) =>
        new Promise((resolve) => {
          ctx.signal.addEventListener('abort', () => {
            reason = ctx.signal.reason
            resolve('stopped')
          })
        }),
      )
      const agent = new Agent(client, { model: 'm', tools: executor })
      const { stop } = await collect(agent.run('go'))
      assert.equal(stop.reason, 'end_turn')
      assert.match(stop.messages.at(-2).content[0].content, /timed out/)
      assert.equal(reason?.name, 'TimeoutError')
    },
  )
})

test("a failed run's stop event carries a stable errorCode (as Python's error_code)", async () => {
  const unauthorized = { status: 401, body: { json: { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } } } }
  const quota = { status: 429, body: { json: { error: { message: 'You exceeded your current quota.', type: 'insufficient_quota', code: 'insufficient_quota' } } } }
  await withServer(
    () => serveScript({ responses: [unauthorized, quota] }, { log: true }),
    async (client, server) => {
      const agent = new Agent(client, { model: 'm' })
      const refused = await agent.run('hi').result()
      assert.equal(refused.reason, 'error')
      assert.equal(refused.errorCode, 'authentication', refused.error)
      const billed = await agent.run('hi').result()
      assert.equal(billed.reason, 'error')
      assert.equal(billed.errorCode, 'quota_exceeded', billed.error)
      const invalid = await agent.run(undefined, { messages: [{ role: 'assistant', content: 'prefill' }] }).result()
      assert.equal(invalid.errorCode, 'invalid_history', invalid.error)
      // One request each (the quota error is not retried); the log can lag the runs' results.
      assert.equal((await server.waitForRequests(2)).length, 2)
      assert.equal(server.requests.length, 2)
    },
  )
})

test("a rate-limited run's stop event carries its status, requestId and retryAfterMs (null when nothing failed)", async () => {
  // A 429 until the client's retries run out: the stop says when to try again and which
  // request to quote (Python's status, request_id and retry_after, in seconds there).
  const limited = {
    status: 429,
    headers: { 'retry-after-ms': '20', 'request-id': 'req_limited' },
    body: { json: { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } } },
  }
  await withServer(
    () => serveScript({ responses: [limited], when_exhausted: 'repeat_last' }),
    async (client) => {
      const stop = await new Agent(client, { model: 'm' }).run('hi').result()
      assert.equal(stop.errorCode, 'rate_limited', stop.error)
      assert.deepEqual([stop.status, stop.requestId, stop.retryAfterMs], [429, 'req_limited', 20])
    },
  )
  await withServer(
    () => serveScript({ responses: [{ body: { events: anthropicEvents([{ type: 'text', text: 'Hi.' }]) } }] }),
    async (client) => {
      const stop = await new Agent(client, { model: 'm' }).run('hi').result()
      assert.equal(stop.reason, 'end_turn')
      assert.deepEqual([stop.status, stop.requestId, stop.retryAfterMs], [null, null, null])
    },
  )
})

test("two next() calls at once on a run's iterator get its events in order, none lost; a second iteration is refused", async () => {
  const script = {
    responses: [
      { body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, friend.' }]) } },
      { body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, friend.' }]) } },
    ],
  }
  await withServer(
    () => serveScript(script),
    async (client) => {
      const agent = new Agent(client, { model: 'claude-test' })
      const { events: expected } = await collect(agent.run('hi'))
      const run = agent.run('hi')
      const iterator = run[Symbol.asyncIterator]()
      // Far more next() calls than events, all at once: each resolves to the next event in
      // turn, then to done.
      const results = await Promise.all(Array.from({ length: expected.length + 5 }, () => iterator.next()))
      const events = results.filter((r) => !r.done).map((r) => r.value)
      assert.deepEqual(
        events.map((e) => e.type),
        expected.map((e) => e.type),
      )
      assert.ok(results.slice(events.length).every((r) => r.done))
      assert.equal(events.at(-1).type, 'stop')
      assert.equal((await run.result()).reason, 'end_turn')
      // Another loop over the same run (another task's) would get some of the events: refused.
      await assert.rejects(run[Symbol.asyncIterator]().next(), ferroloop.InvalidStateError)
    },
  )
})

test('result() after an iterator was abandoned mid-run reads the rest itself; that iterator still gets every event', async () => {
  // result() waited for the loop that had started to read the run to its stop event: after an
  // iterator was dropped between two next() calls (never return()ed), it never settled.
  const reply = { body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, friend.' }]) } }
  await withServer(
    () => serveScript({ responses: [reply, reply] }),
    async (client) => {
      const agent = new Agent(client, { model: 'claude-test' })
      const { events: expected } = await collect(agent.run('hi'))
      const run = agent.run('hi')
      const abandoned = run[Symbol.asyncIterator]()
      const first = await abandoned.next()
      assert.equal(first.value.type, expected[0].type)
      const stop = await settlesWithin(run.result(), 'result() after an abandoned iterator')
      assert.equal(stop.reason, 'end_turn')
      // Taken up again, the iterator goes on where it stopped: result() read the events for it.
      const rest = []
      for (let r = await abandoned.next(); !r.done; r = await abandoned.next()) rest.push(r.value)
      assert.deepEqual(
        [first.value, ...rest].map((e) => e.type),
        expected.map((e) => e.type),
      )
      assert.equal(rest.at(-1), stop)
    },
  )
})

test('result() awaited inside the loop over the run settles, and the loop still gets every event', async () => {
  // The loop waited for result(), which waited for the loop to read on: neither settled.
  const reply = { body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, friend.' }]) } }
  await withServer(
    () => serveScript({ responses: [reply] }),
    async (client) => {
      const run = new Agent(client, { model: 'claude-test' }).run('hi')
      const types = []
      let stop
      for await (const event of run) {
        if (types.length === 0) stop = await settlesWithin(run.result(), 'result() inside the loop')
        types.push(event.type)
      }
      assert.equal(stop.reason, 'end_turn')
      assert.equal(types.at(-1), 'stop')
      assert.ok(types.includes('text_delta'))
    },
  )
})

test('a cut that cannot make progress stops with max_tokens_no_progress (as in Python)', async () => {
  const cut = { body: { events: anthropicEvents([], { stopReason: 'max_tokens' }) } }
  await withServer(
    () => serveScript({ responses: [cut, cut, cut, cut, cut] }, { log: true }),
    async (client, server) => {
      const agent = new Agent(client, { model: 'claude-sonnet-4-5' })
      const stop = await agent.run('write a big file').result()
      assert.equal(stop.reason, 'max_tokens')
      assert.equal(stop.errorCode, 'max_tokens_no_progress')
      const bodies = (await server.waitForRequests(2)).map((r) => JSON.parse(r.body))
      assert.deepEqual(bodies.map((b) => b.max_tokens), [8192, 64000])
      assert.equal(server.requests.length, 2)
    },
  )
})

test('an agent run waiting only on JS tools that never settle lets the process exit, and holds it for everything else', async () => {
  // The child processes hold nothing of their own but the run: the replay server is this
  // process's child. A run whose tools' promises nothing will settle ends as a top-level await
  // on such a promise does (code 13); tools that settle, after a timer or in a microtask, a
  // tool's timeout and an abort's cleanup grace keep the process until the run stops.
  const server = await startServer(['--agent-model'])
  try {
    const lib = JSON.stringify(path.join(__dirname, '..', 'lib', 'index.mjs'))
    const never = '() => new Promise(() => {})'
    const cases = {
      'never-settling tools, for await': { tools: never, body: 'for await (const e of run) console.log(e.type)', status: 13 },
      'never-settling tools, result()': { tools: never, body: 'console.log((await run.result()).reason)', status: 13 },
      'tools settling after a timer, with progress': {
        tools: `async (input, ctx) => { ctx.progress({ at: 1 }); await new Promise((r) => setTimeout(r, 20)); return 'ok' }`,
        body: 'console.log((await run.result()).reason)',
        status: 0,
        out: 'end_turn',
      },
      'tools settling in a microtask': { tools: `async () => 'ok'`, body: 'console.log((await run.result()).reason)', status: 0, out: 'end_turn' },
      'never-settling tools with a timeout': {
        tools: never,
        options: '{ timeoutMs: 100 }',
        body: 'console.log((await run.result()).reason)',
        status: 0,
        out: 'end_turn',
      },
      'never-settling tools, the run aborted': {
        tools: never,
        body: 'setTimeout(() => run.abort(), 50); console.log((await run.result()).reason)',
        status: 0,
        out: 'aborted',
      },
    }
    for (const [name, { tools, options = '{}', body, status, out }] of Object.entries(cases)) {
      const script = `
        import { Agent, Client, ToolExecutor } from ${lib}
        const executor = new ToolExecutor({ cleanupGraceMs: 100 })
        for (const name of ['glob', 'grep', 'read']) executor.tool({ name, concurrencySafe: true, ...${options} }, ${tools})
        const client = new Client({ apiKey: 'k', baseUrl: ${JSON.stringify(server.url)} })
        const run = new Agent(client, { model: 'ferroloop-replay', tools: executor }).run('Explore this directory.')
        ${body}
      `
      const child = await new Promise((resolve) => {
        const proc = require('node:child_process').execFile(
          process.execPath,
          ['--input-type=module', '-e', script],
          { encoding: 'utf8', timeout: 20_000 },
          (error, stdout, stderr) => resolve({ status: proc.exitCode, signal: proc.signalCode, stdout, stderr }),
        )
      })
      assert.equal(child.signal, null, `${name}: had to be killed, something kept the process alive`)
      assert.equal(child.status, status, `${name}: ${child.stderr}`)
      if (out !== undefined) assert.equal(child.stdout.trim(), out, name)
      else assert.doesNotMatch(child.stdout, /stop|end_turn/, name)
    }
  } finally {
    await server.close()
  }
})
