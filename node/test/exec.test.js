'use strict'
// ToolExecutor semantics through JavaScript: request order, the exclusive barrier, the
// concurrency cap, timeouts, AbortSignal reaching JS tools, errors as is_error results.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const { ToolExecutor, AbortError, InvalidArgumentError, InvalidStateError, FerroloopError } = require('../lib/index.js')
const { settlesWithin } = require('./helpers.js')

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(signal.reason)
    })
  })

const use = (id, name, input = {}) => ({ type: 'tool_use', id, name, input })

test('results come in request order, wire-shaped, whatever the completion order', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'wait', concurrencySafe: true }, async ({ ms }) => {
    await sleep(ms)
    return `waited ${ms}`
  })
  const results = await ex.run([use('a', 'wait', { ms: 60 }), use('b', 'wait', { ms: 5 }), use('c', 'wait', { ms: 30 })])
  assert.deepEqual(results, [
    { type: 'tool_result', tool_use_id: 'a', content: 'waited 60', is_error: false },
    { type: 'tool_result', tool_use_id: 'b', content: 'waited 5', is_error: false },
    { type: 'tool_result', tool_use_id: 'c', content: 'waited 30', is_error: false },
  ])
})

test('safe calls overlap up to the cap; an unsafe call runs alone and is a barrier', async () => {
  const ex = new ToolExecutor({ maxConcurrency: 3 })
  let running = 0
  let peak = 0
  const log = []
  const body = (label) => async () => {
    running++
    peak = Math.max(peak, running)
    log.push(`start ${label} (${running} running)`)
    await sleep(15)
    running--
    return label
  }
  ex.tool({ name: 'safe', concurrencySafe: true }, async (input) => body(`safe${input.i}`)())
  ex.tool({ name: 'exclusive' }, async () => body('exclusive')())
  const uses = [0, 1, 2, 3, 4].map((i) => use(`s${i}`, 'safe', { i }))
  uses.push(use('x', 'exclusive'))
  uses.push(use('s5', 'safe', { i: 5 }))
  const results = await ex.run(uses)
  assert.deepEqual(
    results.map((r) => r.content),
    ['safe0', 'safe1', 'safe2', 'safe3', 'safe4', 'exclusive', 'safe5'],
  )
  assert.equal(peak, 3, 'the cap bounds concurrency')
  const exclusive = log.find((line) => line.startsWith('start exclusive'))
  assert.equal(exclusive, 'start exclusive (1 running)', 'the exclusive call runs alone')
  assert.equal(log.at(-1), 'start safe5 (1 running)', 'nothing queued after the barrier starts before it ends')
})

test('concurrencySafe as a function of the input: decided per call at submission, for run() and turn()', async () => {
  const decide = (input) => {
    if (input.mode === 'throws') throw new Error('undecidable')
    return input.mode === 'read'
  }
  const make = () => {
    const state = { running: 0, log: [], asked: [] }
    const ex = new ToolExecutor({ maxConcurrency: 10 })
    ex.tool(
      {
        name: 'fs',
        concurrencySafe: (input) => {
          state.asked.push(input.label)
          return decide(input)
        },
        // A schema makes the inputs travel to Rust (the decision must follow them there too).
        schema: { type: 'object', properties: { mode: { type: 'string' }, label: { type: 'string' } } },
      },
      async ({ label }) => {
        state.running++
        state.log.push(`${label}:${state.running}`)
        await sleep(10)
        state.running--
        return label
      },
    )
    ex.tool({ name: 'plain', concurrencySafe: (input) => input.mode === 'read' }, async ({ label }) => {
      state.running++
      state.log.push(`${label}:${state.running}`)
      await sleep(10)
      state.running--
      return label
    })
    return { ex, state }
  }
  const uses = [
    use('r1', 'fs', { mode: 'read', label: 'r1' }),
    use('r2', 'fs', { mode: 'read', label: 'r2' }),
    use('w1', 'fs', { mode: 'write', label: 'w1' }),
    use('r3', 'plain', { mode: 'read', label: 'r3' }),
    use('r4', 'plain', { mode: 'read', label: 'r4' }),
    use('t1', 'fs', { mode: 'throws', label: 't1' }),
  ]
  const expected = ['r1:1', 'r2:2', 'w1:1', 'r3:1', 'r4:2', 't1:1']

  const batch = make()
  const results = await batch.ex.run(uses)
  assert.deepEqual(results.map((r) => r.content), ['r1', 'r2', 'w1', 'r3', 'r4', 't1'])
  assert.deepEqual(batch.state.log, expected, 'reads overlap; a write, and an undecidable call, run alone')
  assert.deepEqual(batch.state.asked, ['r1', 'r2', 'w1', 't1'], 'asked once per call, at submission')

  const streaming = make()
  const turn = streaming.ex.turn()
  turn.submit(...uses.slice(0, 3))
  turn.submit(...uses.slice(3))
  turn.seal()
  const streamed = await turn.results()
  assert.deepEqual(streamed.map((r) => r.content), ['r1', 'r2', 'w1', 'r3', 'r4', 't1'])
  assert.deepEqual(streaming.state.log, expected)
})

test('a throwing, rejecting, unknown or invalid-input call gets an is_error result', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'throws' }, () => {
    throw new Error('sync boom')
  })
  ex.tool({ name: 'rejects', concurrencySafe: true }, async () => {
    throw new TypeError('async boom')
  })
  ex.tool(
    { name: 'typed', schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } },
    async ({ n }) => `n=${n}`,
  )
  ex.tool({ name: 'explicit' }, async () => ({ content: 'refused', isError: true }))
  const results = await ex.run([
    use('1', 'throws'),
    use('2', 'rejects'),
    use('3', 'missing'),
    use('4', 'typed', { n: 'seven' }),
    use('5', 'typed', { n: 7 }),
    use('6', 'explicit'),
  ])
  assert.deepEqual(
    results.map((r) => r.is_error),
    [true, true, true, true, false, true],
  )
  assert.equal(results[0].content, 'Error: sync boom')
  assert.equal(results[1].content, 'TypeError: async boom')
  assert.match(results[2].content, /Unknown tool 'missing'/)
  assert.match(results[3].content, /n/)
  assert.equal(results[4].content, 'n=7')
  assert.equal(results[5].content, 'refused')
})

test('content blocks and non-string values round-trip', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'blocks' }, async () => [{ type: 'text', text: 'hi' }])
  ex.tool({ name: 'object' }, async () => ({ answer: 42 }))
  const [blocks, object] = await ex.run([use('b', 'blocks'), use('o', 'object')])
  assert.deepEqual(blocks.content, [{ type: 'text', text: 'hi' }])
  assert.equal(object.content, '{"answer":42}')
})

test('the return shapes of Python tools: one content block (an object with a type) is a block', async () => {
  // Python's test_return_shapes, value for value. A single block returned (an image, a text
  // block) was sent to the model as its JSON text in Node, as a content block in Python.
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }
  const values = [
    'text',
    [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }],
    { type: 'text', text: 'one block' },
    { content: 'reported failure', is_error: true },
    null,
    42,
    image,
    { answer: 42 },
    // A class instance is data, not a block written inline: its JSON text.
    new (class Reading {
      constructor() {
        this.type = 'weather'
        this.celsius = 20
      }
    })(),
  ]
  const ex = new ToolExecutor().tool({ name: 'shapes' }, async (input) => values[input.n])
  const uses = values.map((_, n) => use(`s${n}`, 'shapes', { n }))
  for (const results of [await ex.run(uses), await turnResults(ex, uses)]) {
    assert.deepEqual(
      results.map((r) => [r.content, r.is_error]),
      [
        ['text', false],
        [values[1], false],
        [[{ type: 'text', text: 'one block' }], false],
        ['reported failure', true],
        ['', false],
        ['42', false],
        [[image], false],
        ['{"answer":42}', false],
        ['{"type":"weather","celsius":20}', false],
      ],
    )
  }
})

async function turnResults(ex, uses) {
  const turn = ex.turn()
  turn.submit(...uses)
  turn.seal()
  return turn.results()
}

test('a timeout reaches the JS tool as an aborted ctx.signal; a never-settling tool times out', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 50 })
  let sawAbort = null
  ex.tool({ name: 'slow', timeoutMs: 40, concurrencySafe: true }, async (_input, ctx) => {
    try {
      await sleep(10_000, ctx.signal)
    } catch (err) {
      sawAbort = err
      throw err
    }
  })
  ex.tool({ name: 'never', timeoutMs: 30, concurrencySafe: true }, () => new Promise(() => {}))
  const started = Date.now()
  const [slow, never] = await ex.run([use('s', 'slow'), use('n', 'never')])
  assert.ok(Date.now() - started < 5_000)
  assert.equal(slow.is_error, true)
  assert.match(slow.content, /timed out/)
  assert.equal(never.is_error, true)
  assert.match(never.content, /timed out/)
  assert.ok(sawAbort instanceof FerroloopError, 'the tool saw the abort')
  assert.equal(sawAbort.code, 'timeout')
})

test("the executor's defaultTimeoutMs reaches a tool as a TimeoutError, as the tool's own timeoutMs does", async () => {
  // Only the tool's own timeout was handed to the call, which then named a timeout by the
  // executor's default 'aborted': ctx.signal.reason was an AbortError.
  for (const [options, declared] of [[{}, { timeoutMs: 40 }], [{ defaultTimeoutMs: 40 }, {}]]) {
    const ex = new ToolExecutor({ cleanupGraceMs: 100, ...options })
    let reason
    ex.tool({ name: 'wait', ...declared }, (_input, ctx) => new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        reason = ctx.signal.reason
        resolve('stopped')
      })
    }))
    const [result] = await ex.run([use('w', 'wait')])
    const what = JSON.stringify(options)
    assert.match(result.content, /timed out/, what)
    assert.equal(reason?.name, 'TimeoutError', what)
    assert.equal(reason.code, 'timeout', what)
  }
})

test('aborting the signal given to turn() cancels and seals it: every call answers, later submits are refused', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 100 })
  const causes = []
  ex.tool({ name: 'long', concurrencySafe: true }, async (_input, ctx) => {
    try {
      await sleep(10_000, ctx.signal)
      return 'finished'
    } catch (err) {
      causes.push(ctx.signal.reason?.cause)
      throw err
    }
  })
  const controller = new AbortController()
  const turn = ex.turn({ signal: controller.signal })
  turn.submit(use('a', 'long'), use('b', 'long'))
  const events = []
  const consumer = (async () => {
    for await (const event of turn) {
      events.push(event)
      if (event.type === 'started' && events.filter((e) => e.type === 'started').length === 2) {
        controller.abort(new Error('the user pressed stop'))
      }
    }
  })()
  // The loop ends by itself: aborting sealed the turn (nobody calls seal()).
  await consumer
  const results = events.filter((e) => e.type === 'result').map((e) => [e.result.tool_use_id, e.result.is_error])
  assert.deepEqual(results, [['a', true], ['b', true]])
  assert.deepEqual(causes.map((cause) => cause?.message), ['the user pressed stop', 'the user pressed stop'])
  assert.throws(() => turn.submit(use('c', 'long')), InvalidStateError)
  // An already-aborted signal: no turn, as run() rejects; a signal that is no AbortSignal is refused.
  assert.throws(() => ex.turn({ signal: AbortSignal.abort() }), (err) => err instanceof AbortError && err.code === 'aborted')
  assert.throws(() => ex.turn({ signal: 5 }), InvalidArgumentError)
  // signal: null is none; aborting after the turn is done changes nothing.
  const late = new AbortController()
  const done = ex.turn({ signal: late.signal })
  done.submit(use('d', 'long'))
  done.cancel()
  assert.equal((await done.results())[0].is_error, true)
  late.abort()
  assert.equal(ex.turn({ signal: null }) instanceof Object, true)
})

test('aborting run() aborts running JS tools via ctx.signal and rejects with AbortError', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 100 })
  const aborted = []
  ex.tool({ name: 'long', concurrencySafe: true }, async (input, ctx) => {
    assert.equal(ctx.toolUseId, input.id)
    try {
      await sleep(10_000, ctx.signal)
      return 'finished'
    } catch (err) {
      aborted.push(input.id)
      throw err
    }
  })
  const controller = new AbortController()
  const run = ex.run([use('l1', 'long', { id: 'l1' }), use('l2', 'long', { id: 'l2' })], { signal: controller.signal })
  setTimeout(() => controller.abort(new Error('user pressed escape')), 30)
  await assert.rejects(run, (err) => err instanceof AbortError && err.name === 'AbortError' && err.code === 'aborted')
  assert.deepEqual(aborted.sort(), ['l1', 'l2'])
  // An already-aborted signal rejects at once.
  await assert.rejects(ex.run([use('z', 'long', { id: 'z' })], { signal: AbortSignal.abort() }), AbortError)
})

test('cancelsSiblingsOnError cancels the running siblings of a failing call', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 100 })
  ex.tool({ name: 'shell', concurrencySafe: true, cancelsSiblingsOnError: true }, async ({ fail, ms }, ctx) => {
    await sleep(ms, ctx.signal)
    if (fail) throw new Error('exit 1')
    return 'ok'
  })
  const results = await ex.run([use('a', 'shell', { ms: 2_000 }), use('b', 'shell', { fail: true, ms: 10 })])
  assert.equal(results[1].content, 'Error: exit 1')
  assert.equal(results[0].is_error, true, 'the sibling was cancelled')
})

test('streaming turn: submit as sealed, events as they happen, results in order', async () => {
  const ex = new ToolExecutor()
  // The first call finishes only once the second's `finished` event has been seen: the order of
  // completions is the test's own, not a race between two sleeps on a loaded machine.
  let releaseOne
  const oneMayFinish = new Promise((resolve) => {
    releaseOne = resolve
  })
  ex.tool({ name: 'echo', concurrencySafe: true }, async ({ text }) => {
    if (text === 'one') await oneMayFinish
    return text
  })
  const turn = ex.turn()
  turn.submit(use('1', 'echo', { text: 'one' }))
  const events = []
  const consumer = (async () => {
    for await (const event of turn) {
      events.push(event)
      if (event.type === 'finished' && event.toolUseId === '2') releaseOne()
    }
  })()
  await sleep(5)
  turn.submit(use('2', 'echo', { text: 'two' }))
  turn.seal()
  assert.throws(() => turn.submit(use('3', 'echo', { text: 'late', ms: 1 })), InvalidStateError)
  await consumer
  const results = events.filter((e) => e.type === 'result')
  assert.deepEqual(
    results.map((e) => [e.index, e.result.tool_use_id, e.result.content]),
    [
      [0, '1', 'one'],
      [1, '2', 'two'],
    ],
  )
  const finished = events.filter((e) => e.type === 'finished').map((e) => e.toolUseId)
  assert.deepEqual(finished, ['2', '1'], 'finished events come in completion order')
  for (const e of events.filter((e) => e.type === 'started')) assert.equal(typeof e.queuedMs, 'number')
})

test('turn.results() called again resolves with the same results, as Python\'s Turn.results()', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'echo', concurrencySafe: true }, async ({ n }) => {
    await sleep(5)
    return String(n)
  })
  const expected = [
    { type: 'tool_result', tool_use_id: 'a', content: '0', is_error: false },
    { type: 'tool_result', tool_use_id: 'b', content: '1', is_error: false },
  ]
  const turn = ex.turn()
  turn.submit(use('a', 'echo', { n: 0 }), use('b', 'echo', { n: 1 }))
  turn.seal()
  const [first, second] = await Promise.all([turn.results(), turn.results()])
  assert.deepEqual(first, expected)
  assert.deepEqual(second, expected)
  assert.deepEqual(await turn.results(), expected)

  const iterated = ex.turn()
  iterated.submit(use('c', 'echo', { n: 2 }))
  iterated.seal()
  const kinds = []
  for await (const event of iterated) kinds.push(event.type)
  assert.equal(kinds.filter((k) => k === 'result').length, 1)
  assert.deepEqual((await iterated.results()).map((r) => r.content), ['2'])
  assert.deepEqual((await iterated.results()).map((r) => r.content), ['2'])
})

test('turn.cancel answers every call with an is_error result', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 50, maxConcurrency: 1 })
  ex.tool({ name: 'long', concurrencySafe: true }, async (_i, ctx) => {
    await sleep(5_000, ctx.signal)
    return 'done'
  })
  const turn = ex.turn()
  turn.submit(use('a', 'long'), use('b', 'long'))
  turn.seal()
  setTimeout(() => turn.cancel(), 20)
  const results = await turn.results()
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error]),
    [
      ['a', true],
      ['b', true],
    ],
  )
})

test('bad declarations and arguments raise InvalidArgumentError', () => {
  const ex = new ToolExecutor()
  const noop = async () => 'ok'
  assert.throws(() => ex.tool({}, noop), InvalidArgumentError)
  assert.throws(() => ex.tool({ name: 'a' }, 'not a function'), InvalidArgumentError)
  assert.throws(() => ex.tool({ name: 'a', timeoutMs: -5 }, noop), InvalidArgumentError)
  assert.throws(() => ex.tool({ name: 'a', maxResultChars: 1.5 }, noop), InvalidArgumentError)
  assert.throws(() => ex.tool({ name: 'a', schema: 'x' }, noop), InvalidArgumentError)
  assert.throws(() => ex.tool({ name: 'a', concurrencySafe: 'yes' }, noop), InvalidArgumentError)
  ex.tool({ name: 'a' }, noop)
  assert.throws(() => ex.tool({ name: 'a' }, noop), InvalidArgumentError)
  assert.throws(() => new ToolExecutor({ maxConcurrency: 0 }), InvalidArgumentError)
  assert.rejects(ex.run('nope'), InvalidArgumentError)
})

test('maxResultChars replaces an oversized result with a preview', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'big', maxResultChars: 100 }, async () => 'line\n'.repeat(1000))
  ex.tool({ name: 'unlimited', maxResultChars: Infinity }, async () => 'x'.repeat(150_000))
  const [big, unlimited] = await ex.run([use('b', 'big'), use('u', 'unlimited')])
  assert.equal(big.is_error, false)
  assert.ok(big.content.length < 5000, `preview is short (${big.content.length})`)
  assert.notEqual(big.content, 'line\n'.repeat(1000))
  assert.equal(unlimited.content.length, 150_000)

  // The turn's aggregate budget applies on top, unless disabled.
  const open = new ToolExecutor({ turnBudgetChars: Infinity })
  open.tool({ name: 'huge', maxResultChars: Infinity }, async () => 'y'.repeat(300_000))
  const [huge] = await open.run([use('h', 'huge')])
  assert.equal(huge.content.length, 300_000)
})

test('small limits: timeout and abort messages stay readable, the turn budget never grows a result', async (t) => {
  const fs = require('node:fs')
  const os = require('node:os')
  const spillDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferroloop-node-spill-'))
  t.after(() => fs.rmSync(spillDir, { recursive: true, force: true }))

  // A result limit of 10 characters applies to what the tool returns, not to the executor's
  // own timeout and cancellation messages.
  const ex = new ToolExecutor({ spillDir, cleanupGraceMs: 50 })
  ex.tool({ name: 'slow', timeoutMs: 30, maxResultChars: 10 }, (_input, ctx) => sleep(10_000, ctx.signal))
  ex.tool({ name: 'hang', maxResultChars: 10, concurrencySafe: true }, (_input, ctx) => sleep(10_000, ctx.signal))
  const [slow] = await ex.run([use('s', 'slow')])
  assert.equal(slow.content, "Tool 'slow' timed out after 30ms")
  const turn = ex.turn()
  turn.submit(use('h', 'hang'))
  turn.seal()
  setTimeout(() => turn.cancel(), 20)
  const [hang] = await turn.results()
  assert.equal(hang.content, "Tool 'hang' was cancelled: the turn was cancelled")
  assert.deepEqual(fs.readdirSync(spillDir), [])

  // Ten small results over a small turn budget: a preview would be longer than each of them,
  // so they are kept whole (they all used to be replaced, and the turn grew tenfold).
  const budget = new ToolExecutor({ spillDir, turnBudgetChars: 300 })
  budget.tool({ name: 'small', concurrencySafe: true }, async () => 's'.repeat(40))
  const results = await budget.run(Array.from({ length: 10 }, (_, i) => use(`m${i}`, 'small')))
  assert.deepEqual(
    results.map((r) => r.content),
    Array(10).fill('s'.repeat(40)),
  )
  assert.deepEqual(fs.readdirSync(spillDir), [])
})

test('tuple schemas register and validate each position; enums match 1.0 to 1', async () => {
  const ex = new ToolExecutor()
  ex.tool(
    {
      name: 'place',
      schema: {
        type: 'object',
        properties: {
          point: { type: 'array', items: [{ type: 'integer' }, { type: 'string' }] },
          level: { enum: [1, 2] },
        },
      },
    },
    async ({ point, level }) => `${point.join(',')} ${level}`,
  )
  const [ok, bad] = await ex.run([
    { type: 'tool_use', id: 'a', name: 'place', input: { point: [1, 'x'], level: 2 } },
    { type: 'tool_use', id: 'b', name: 'place', input: { point: ['x', 1] } },
  ])
  assert.equal(ok.is_error, false)
  assert.equal(ok.content, '1,x 2')
  assert.equal(
    bad.content,
    "Invalid input for tool 'place': input.point[0]: expected integer, got string; input.point[1]: expected string, got number",
  )
})

test('schema bounds are enforced: minimum, maxLength, uniqueItems', async () => {
  // zod's `.int().min(1)` and `.max(3)`: the bounds were accepted and not checked.
  const ex = new ToolExecutor()
  let calls = 0
  ex.tool(
    {
      name: 'lookup',
      schema: {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1 },
          code: { type: 'string', maxLength: 3 },
          tags: { type: 'array', uniqueItems: true },
        },
      },
    },
    () => { calls++; return 'ok' },
  )
  const [ok, bad] = await ex.run([
    { type: 'tool_use', id: 'a', name: 'lookup', input: { limit: 1, code: 'abc', tags: ['x', 'y'] } },
    { type: 'tool_use', id: 'b', name: 'lookup', input: { limit: 0, code: 'abcd', tags: ['x', 'x'] } },
  ])
  assert.equal(ok.content, 'ok')
  assert.equal(
    bad.content,
    "Invalid input for tool 'lookup': input.limit: must be at least 1, got 0; input.code: must have at most 3 characters, got 4; input.tags: must not repeat items: items 0 and 1 are equal",
  )
  assert.equal(calls, 1)
  assert.throws(() => ex.tool({ name: 'bad', schema: { multipleOf: 0 } }, () => 'x'), InvalidArgumentError)
})

test('schemas as Pydantic and zod write them: $ref, anyOf with null, oneOf and pattern are enforced', async () => {
  // They were accepted and not checked: a wrong Optional[Point] or a code off its pattern ran.
  const ex = new ToolExecutor()
  let calls = 0
  const pydantic = {
    $defs: {
      Point: {
        properties: { x: { title: 'X', type: 'integer' }, y: { title: 'Y', type: 'integer' } },
        required: ['x', 'y'],
        title: 'Point',
        type: 'object',
      },
    },
    properties: {
      name: { title: 'Name', type: 'string' },
      at: { anyOf: [{ $ref: '#/$defs/Point' }, { type: 'null' }], default: null },
    },
    required: ['name'],
    title: 'Place',
    type: 'object',
  }
  ex.tool({ name: 'place', schema: pydantic }, () => { calls++; return 'ok' })
  const zod = {
    type: 'object',
    properties: {
      code: { type: 'string', pattern: '^[A-Z]{3}-\\d+$' },
      kind: { oneOf: [{ type: 'string', enum: ['a', 'b'] }, { type: 'integer' }] },
      again: { $ref: '#/properties/code' },
    },
    required: ['code'],
    additionalProperties: false,
    $schema: 'http://json-schema.org/draft-07/schema#',
  }
  ex.tool({ name: 'ticket', schema: zod }, () => { calls++; return 'ok' })
  const results = await ex.run([
    { type: 'tool_use', id: 'a', name: 'place', input: { name: 'home', at: { x: 1, y: 2 } } },
    { type: 'tool_use', id: 'b', name: 'place', input: { name: 'home', at: null } },
    { type: 'tool_use', id: 'c', name: 'place', input: { name: 'home', at: { x: 1 } } },
    { type: 'tool_use', id: 'd', name: 'place', input: { name: 'home', at: 'here' } },
    { type: 'tool_use', id: 'e', name: 'ticket', input: { code: 'ABC-12', kind: 3, again: 'XYZ-1' } },
    { type: 'tool_use', id: 'f', name: 'ticket', input: { code: 'abc', kind: 'c', again: 'x' } },
  ])
  assert.deepEqual(results.map((r) => r.content).slice(0, 2), ['ok', 'ok'])
  assert.equal(results[4].content, 'ok')
  assert.equal(
    results[2].content,
    "Invalid input for tool 'place': input.at: matches no alternative of `anyOf`; the closest is alternative 0; input.at: missing required property \"y\"",
  )
  assert.equal(
    results[3].content,
    "Invalid input for tool 'place': input.at: matches no alternative of `anyOf`: expected null or object, got string",
  )
  assert.equal(
    results[5].content,
    "Invalid input for tool 'ticket': input.code: must match the pattern \"^[A-Z]{3}-\\\\d+$\"; input.kind: matches no alternative of `oneOf`; the closest is alternative 0; input.kind: must be one of [\"a\",\"b\"]; input.again: must match the pattern \"^[A-Z]{3}-\\\\d+$\"",
  )
  assert.equal(calls, 3)
  // A reference that resolves to nothing, or only to itself, is refused when the tool registers.
  assert.throws(
    () => ex.tool({ name: 'broken', schema: { properties: { a: { $ref: '#/$defs/Missing' } } } }, () => 'x'),
    { name: 'InvalidArgumentError', message: "tool 'broken': invalid input schema at /properties/a: `$ref` \"#/$defs/Missing\" does not resolve in this schema" },
  )
  assert.throws(() => ex.tool({ name: 'loop', schema: { $ref: '#' } }, () => 'x'), InvalidArgumentError)
})

test('a process with an executor and a never-settling tool exits by itself after run()', () => {
  const script = `
    const { ToolExecutor } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'index.js'))})
    const ex = new ToolExecutor({ cleanupGraceMs: 20 })
    ex.tool({ name: 'never', timeoutMs: 20 }, () => new Promise(() => {}))
    ex.run([{ id: 'n', name: 'never', input: {} }]).then((r) => console.log(r[0].is_error))
  `
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.signal, null, 'had to be killed: something kept the process alive')
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout.trim(), 'true')
})

test('a run() or turn waiting only on a JS tool that never settles lets the process exit, as Promise.all does', () => {
  // No timeout, no abort: nothing native is pending, only the tool's promise, which nothing
  // will settle. Plain JavaScript lets such a process exit (a top-level await on it ends with
  // code 13, "unsettled top-level await"); so must the addon.
  const lib = JSON.stringify(path.join(__dirname, '..', 'lib', 'index.mjs'))
  const cases = {
    run: `
      const [r] = await ex.run([{ id: 'n', name: 'never', input: {} }])
      console.log('settled', r.content)`,
    'turn next()': `
      const turn = ex.turn()
      turn.submit({ id: 'n', name: 'never', input: {} })
      for await (const event of turn) console.log(event.type)`,
    'an open turn with no calls': `
      const turn = ex.turn()
      for await (const event of turn) console.log(event.type)`,
    'Promise.all (the reference)': `
      await Promise.all([new Promise(() => {})])`,
  }
  for (const [name, body] of Object.entries(cases)) {
    const script = `
      import { ToolExecutor } from ${lib}
      const ex = new ToolExecutor()
      ex.tool({ name: 'never' }, () => new Promise(() => {}))
      ${body}
    `
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 })
    assert.equal(run.signal, null, `${name}: had to be killed, something kept the process alive`)
    assert.equal(run.status, 13, `${name}: ${run.stderr}`)
    assert.doesNotMatch(run.stdout, /settled|result/, name)
  }
})

test('a run() waits for what is native: a tool timeout, an abort and its cleanup grace', () => {
  // The same never-settling tool, now with a timeout, or aborted with a grace: the process
  // stays until the native timer answers the call, and the run resolves.
  const lib = JSON.stringify(path.join(__dirname, '..', 'lib', 'index.mjs'))
  const script = `
    import { ToolExecutor } from ${lib}
    const ex = new ToolExecutor({ cleanupGraceMs: 150 })
    ex.tool({ name: 'never' }, () => new Promise(() => {}))
    ex.tool({ name: 'timed', timeoutMs: 100 }, () => new Promise(() => {}))
    let started = Date.now()
    const [t] = await ex.run([{ id: 't', name: 'timed', input: {} }])
    console.log('timed', t.is_error, Date.now() - started >= 90)
    const controller = new AbortController()
    // Unref'd: it must not be what keeps the process alive while the grace runs.
    setTimeout(() => controller.abort(), 30).unref()
    const turn = ex.turn({ signal: controller.signal })
    turn.submit({ id: 'a', name: 'never', input: {} })
    setTimeout(() => {}, 60)
    started = Date.now()
    const [a] = await turn.results()
    console.log('aborted', a.is_error, Date.now() - started >= 150)
  `
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.signal, null, 'had to be killed')
  assert.equal(run.status, 0, run.stderr)
  assert.deepEqual(run.stdout.trim().split('\n'), ['timed true true', 'aborted true true'])
})

test('a top-level await on run() keeps the process alive until the results arrive', () => {
  const script = `
    import { ToolExecutor } from ${JSON.stringify(path.join(__dirname, '..', 'lib', 'index.mjs'))}
    const ex = new ToolExecutor()
    ex.tool({ name: 'later' }, () => new Promise((resolve) => setTimeout(() => resolve('late'), 50)))
    const [r] = await ex.run([{ id: 'l', name: 'later', input: {} }])
    console.log(r.content)
  `
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout.trim(), 'late')
})

test('an abandoned turn (never awaited) does not keep the process alive', () => {
  const script = `
    const { ToolExecutor } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'index.js'))})
    const ex = new ToolExecutor()
    ex.tool({ name: 'slow', timeoutMs: 60_000 }, () => new Promise(() => {}))
    const turn = ex.turn()
    turn.submit({ id: 's', name: 'slow', input: {} })
    setTimeout(() => console.log('tick'), 20)
  `
  const started = Date.now()
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.signal, null, 'had to be killed: the turn kept the process alive')
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout.trim(), 'tick')
  assert.ok(Date.now() - started < 15_000)
})

test('calls handed over by index: a mixed batch settles in order, whatever way each call ends', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 50 })
  ex.tool({ name: 'throws', concurrencySafe: true }, () => {
    throw new Error('sync boom')
  })
  ex.tool({ name: 'rejects', concurrencySafe: true }, async () => {
    await sleep(2)
    throw new TypeError('async boom')
  })
  ex.tool({ name: 'text', concurrencySafe: true }, ({ s }) => s)
  ex.tool({ name: 'blocks', concurrencySafe: true }, async () => [{ type: 'text', text: 'ünïcode 🎉' }])
  ex.tool({ name: 'array', concurrencySafe: true }, async () => ({ content: ['not', 'blocks'] }))
  ex.tool({ name: 'refuses', concurrencySafe: true }, async () => ({ content: 'no 🙅', isError: true }))
  // A timeout needs a future in the core: this tool takes the other path in the same turn.
  ex.tool({ name: 'slow', timeoutMs: 20, concurrencySafe: true }, (_input, ctx) => sleep(10_000, ctx.signal))
  ex.tool({ name: 'big', concurrencySafe: true, maxResultChars: 50 }, async () => 'é'.repeat(100))
  const texts = ['', 'plain', 'héllo wörld', '🎉🎉 surrogate pairs', 'x'.repeat(10_000), '\u0000nul\u0000']
  const results = await ex.run([
    use('t', 'throws'),
    use('r', 'rejects'),
    ...texts.map((s, i) => use(`s${i}`, 'text', { s })),
    use('b', 'blocks'),
    use('bb', 'array'),
    use('e', 'refuses'),
    use('slow', 'slow'),
    use('big', 'big'),
    use('ü🎉', 'missing'),
  ])
  assert.deepEqual(
    results.map((r) => r.tool_use_id),
    ['t', 'r', ...texts.map((_, i) => `s${i}`), 'b', 'bb', 'e', 'slow', 'big', 'ü🎉'],
  )
  const [t, r, ...rest] = results
  assert.deepEqual([t.is_error, t.content], [true, 'Error: sync boom'])
  assert.deepEqual([r.is_error, r.content], [true, 'TypeError: async boom'])
  const strings = rest.slice(0, texts.length)
  assert.deepEqual(
    strings.map((x) => [x.is_error, x.content]),
    texts.map((s) => [false, s]),
  )
  const [b, bb, e, slow, big, u] = rest.slice(texts.length)
  assert.deepEqual([b.is_error, b.content], [false, [{ type: 'text', text: 'ünïcode 🎉' }]])
  assert.equal(bb.is_error, false)
  // An array travels as blocks; the core sends one that holds no blocks as its JSON text
  // (the providers refuse anything but blocks in a tool_result's content).
  assert.deepEqual(bb.content, '["not","blocks"]', 'an array of plain values is sent as its JSON text')
  assert.deepEqual([e.is_error, e.content], [true, 'no 🙅'])
  assert.equal(slow.is_error, true)
  assert.match(slow.content, /timed out/)
  assert.equal(big.is_error, false)
  assert.notEqual(big.content, 'é'.repeat(100), 'the limit replaced the settled text')
  assert.equal(u.is_error, true)
  assert.match(u.content, /Unknown tool 'missing'/)
})

test('calls handed over by index: cancelling aborts them, the grace bounds a tool that ignores it', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 40, maxConcurrency: 2 })
  let politeSaw = null
  let stubbornSettle = null
  ex.tool({ name: 'polite', concurrencySafe: true }, async (_input, ctx) => {
    ctx.progress({ step: 'started' })
    try {
      await sleep(10_000, ctx.signal)
      return 'finished'
    } catch (err) {
      politeSaw = err
      return 'stopped early'
    }
  })
  ex.tool(
    { name: 'stubborn', concurrencySafe: true },
    () =>
      new Promise((resolve) => {
        stubbornSettle = resolve
      }),
  )
  const turn = ex.turn()
  turn.submit(use('p', 'polite'), use('s', 'stubborn'), use('q', 'polite'))
  turn.seal()
  const events = []
  const consumer = (async () => {
    for await (const event of turn) {
      events.push(event)
      if (event.type === 'progress') turn.cancel()
    }
  })()
  await consumer
  const results = events.filter((e) => e.type === 'result').map((e) => e.result)
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error]),
    [
      ['p', true],
      ['s', true],
      ['q', true],
    ],
  )
  assert.match(results[0].content, /was cancelled: the turn was cancelled/, 'answered with the cancellation, not its return value')
  assert.match(results[1].content, /was cancelled/)
  assert.match(results[2].content, /was not run/, 'the queued call never started')
  assert.ok(politeSaw instanceof AbortError, 'the running call saw the abort through ctx.signal')
  assert.deepEqual(
    events.filter((e) => e.type === 'detached').map((e) => e.toolUseId),
    ['s'],
    'the call that ignored the abort past the grace is reported detached',
  )
  assert.deepEqual(
    events.filter((e) => e.type === 'progress').map((e) => [e.toolUseId, e.data]),
    [['p', { step: 'started' }]],
  )
  // Settling after the turn ended is ignored.
  stubbornSettle('too late')
  await sleep(5)
})

test('a large batch settles in one go: every result in order, ASCII and not', async () => {
  const ex = new ToolExecutor({ maxConcurrency: 1000 })
  ex.tool({ name: 'echo', concurrencySafe: true }, async ({ s }) => s)
  ex.tool({ name: 'sync', concurrencySafe: true }, ({ s }) => s)
  const uses = []
  for (let i = 0; i < 1000; i++) {
    const s = i % 7 === 0 ? `ü${i}🎉` : `r${i}`
    uses.push(use(i % 5 === 0 ? `íd${i}` : `id${i}`, i % 2 === 0 ? 'echo' : 'sync', { s }))
  }
  const results = await ex.run(uses)
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.content, r.is_error]),
    uses.map((u) => [u.id, u.input.s, false]),
  )
})

test('run() holds the text results in JS, and asks for them when the turn budget needs them', async () => {
  // Under the budget: the texts never cross; the results are the strings the tools returned.
  const ex = new ToolExecutor({ maxConcurrency: 100, turnBudgetChars: 1_000 })
  ex.tool({ name: 'say', concurrencySafe: true }, async ({ s }) => s)
  ex.tool({ name: 'big', concurrencySafe: true, maxResultChars: 50 }, async ({ n }) => 'é'.repeat(n))
  const small = await ex.run([use('a', 'say', { s: 'hello' }), use('b', 'big', { n: 10 }), use('c', 'say', { s: 'wörld' })])
  assert.deepEqual(
    small.map((r) => r.content),
    ['hello', 'é'.repeat(10), 'wörld'],
  )
  // Over a tool's limit (20 characters may be 60 bytes > 50): the text is needed and replaced.
  const [limited] = await ex.run([use('d', 'big', { n: 60 })])
  assert.match(limited.content, /Output too large \(60 characters\)/)
  // Within the limit by characters, maybe not by bytes (20 × 'é' may be 60 bytes): still held.
  const [within] = await ex.run([use('e', 'big', { n: 20 })])
  assert.equal(within.content, 'é'.repeat(20))
  // Over the turn budget: the held texts are asked for, and the largest result is spilled.
  const budgeted = new ToolExecutor({ maxConcurrency: 100, turnBudgetChars: 5_000 })
  budgeted.tool({ name: 'say', concurrencySafe: true }, async ({ s }) => s)
  const sizes = [100, 200, 10_000]
  const uses = sizes.map((n, i) => use(`t${i}`, 'say', { s: String(i).repeat(n) }))
  const results = await budgeted.run(uses)
  assert.equal(results[0].content, '0'.repeat(100))
  assert.equal(results[1].content, '1'.repeat(200))
  assert.match(results[2].content, /Output too large \(10000 characters\)/)
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error]),
    [['t0', false], ['t1', false], ['t2', false]],
  )
})

test('a finished turn is garbage: its wake function is released', async () => {
  const v8 = require('node:v8')
  const vm = require('node:vm')
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc')
  const ex = new ToolExecutor({ maxConcurrency: 10 })
  ex.tool({ name: 'noop', concurrencySafe: true }, async () => 'ok')
  let turn = ex.turn()
  const collected = new WeakRef(turn)
  turn.submit(use('a', 'noop'), use('b', 'noop'))
  turn.seal()
  const results = await turn.results()
  assert.equal(results.length, 2)
  turn = null
  // The native side releases its thread-safe function asynchronously: a few turns of the loop.
  for (let i = 0; i < 20 && collected.deref() !== undefined; i++) {
    await new Promise(setImmediate)
    gc()
  }
  assert.equal(collected.deref(), undefined, 'the turn was collected')
})

/** Blocks the JS thread for `ms` milliseconds (a synchronous tool's busy work). */
function blockFor(ms) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    // busy
  }
}

test('a synchronous tool that blocks the event loop past its timeoutMs gets the timeout result', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 50 })
  ex.tool({ name: 'busy', timeoutMs: 30 }, () => {
    blockFor(200)
    return 'done too late'
  })
  ex.tool({ name: 'quick', timeoutMs: 5_000 }, () => {
    blockFor(20)
    return 'done in time'
  })
  const [busy, quick] = await ex.run([use('b', 'busy'), use('q', 'quick')])
  assert.deepEqual(busy, { type: 'tool_result', tool_use_id: 'b', content: "Tool 'busy' timed out after 30ms", is_error: true })
  assert.deepEqual(quick, { type: 'tool_result', tool_use_id: 'q', content: 'done in time', is_error: false })
  // The same in a streaming turn, with the status the events report.
  const turn = ex.turn()
  turn.submit(use('t', 'busy'))
  turn.seal()
  const finished = []
  for await (const event of turn) if (event.type === 'finished') finished.push(event.status)
  assert.deepEqual(finished, ['timed_out'])
  const [result] = await turn.results()
  assert.equal(result.content, "Tool 'busy' timed out after 30ms")
  assert.equal(result.is_error, true)
})

test("leaving a turn's for await early cancels its running calls; each still gets one result", async () => {
  const seen = []
  const ex = new ToolExecutor({ cleanupGraceMs: 500 })
  ex.tool({ name: 'watch', concurrencySafe: true }, (_input, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        seen.push(ctx.signal.reason)
        resolve('stopped')
      })
    })
  })
  // With a timeout, the call takes the other path (a native future rather than a call by index).
  ex.tool({ name: 'timed', concurrencySafe: true, timeoutMs: 60_000 }, (_input, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        seen.push(ctx.signal.reason)
        resolve('stopped')
      })
    })
  })
  const turn = ex.turn()
  turn.submit(use('a', 'watch'), use('b', 'timed'))
  let started = 0
  for await (const event of turn) {
    if (event.type === 'started' && ++started === 2) break
  }
  let timer
  const results = await Promise.race([
    turn.results(),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('results() hung after an early break')), 10_000)
    }),
  ]).finally(() => clearTimeout(timer))
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error]),
    [
      ['a', true],
      ['b', true],
    ],
  )
  for (const r of results) assert.match(r.content, /cancelled/)
  assert.equal(seen.length, 2, 'both tools saw their ctx.signal abort')
  for (const reason of seen) {
    assert.equal(reason.name, 'AbortError')
    assert.match(String(reason.cause?.message), /left early/)
  }
  // The iterator a loop left is finished, as any async iterator after return().
  const turn2 = ex.turn()
  turn2.submit(use('c', 'watch'))
  const iterator = turn2[Symbol.asyncIterator]()
  assert.equal((await iterator.next()).value.type, 'started')
  assert.deepEqual(await iterator.return(), { done: true, value: undefined })
  assert.deepEqual(await iterator.next(), { done: true, value: undefined })
  const [c] = await turn2.results()
  assert.equal(c.is_error, true)
})

test("closing a turn's iterator before reading cancels and seals the turn, as leaving its loop does", async () => {
  const ex = new ToolExecutor()
  const seen = []
  ex.tool({ name: 'watch' }, (input, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        seen.push(ctx.signal.reason)
        resolve('stopped')
      })
    })
  })
  const turn = ex.turn()
  turn.submit(use('a', 'watch'))
  assert.deepEqual(await turn[Symbol.asyncIterator]().return(), { done: true, value: undefined })
  let timer
  const [a] = await Promise.race([
    turn.results(),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('the turn went on after its iterator was closed')), 10_000)
    }),
  ]).finally(() => clearTimeout(timer))
  assert.equal(a.is_error, true)
  assert.match(a.content, /cancelled/)
  assert.throws(() => turn.submit(use('b', 'watch')), 'the turn is sealed')
})

test('a turn is followed by one loop at a time: a second loop\'s next() rejects with InvalidStateError while the first one\'s is pending, as Python\'s Turn refuses it', async () => {
  // The two loops shared one cursor, each getting only some of the events (a result or a
  // finished event missing from each), without a word; Python raises, and a second iteration
  // of an AgentRun or a MessageStream rejects so.
  const ex = new ToolExecutor().tool({ name: 'slow', concurrencySafe: true }, async (input) => {
    await sleep(10 * input.n)
    return `done ${input.n}`
  })
  const turn = ex.turn()
  turn.submit(use('a', 'slow', { n: 1 }), use('b', 'slow', { n: 2 }), use('c', 'slow', { n: 3 }))
  turn.seal()
  const first = turn[Symbol.asyncIterator]()
  const seen = []
  const step = await first.next()
  seen.push(step.value.type)
  // Refused while the first loop waits for its next event (as Python refuses a second
  // __anext__ while one is waiting).
  const pending = first.next()
  const second = turn[Symbol.asyncIterator]()
  await assert.rejects(second.next(), (err) => err instanceof InvalidStateError && err.code === 'invalid_state' && /one loop at a time/.test(err.message))
  const next = await pending
  if (!next.done) seen.push(next.value.type)
  // Closing the refused iterator unread cancels nothing: the first loop still follows the turn.
  await second.return()
  for (let r = await first.next(); !r.done; r = await first.next()) seen.push(r.value.type)
  assert.deepEqual(seen.filter((type) => type === 'result').length, 3)
  assert.deepEqual(seen.filter((type) => type === 'finished').length, 3)
  assert.deepEqual((await turn.results()).map((r) => [r.content, r.is_error]), [
    ['done 1', false],
    ['done 2', false],
    ['done 3', false],
  ])
  // Once that loop has ended, a new one may follow the turn: it is done.
  const after = []
  for await (const event of turn) after.push(event)
  assert.deepEqual(after, [])
})

test('an iterator abandoned after next() (never return()ed) does not keep a later loop from the turn, as in Python', async () => {
  // It counted as following the turn until the turn ended: the later loop's next() was
  // refused with InvalidStateError, where Python refuses a second reader only while the first
  // one is waiting for an event.
  const ex = new ToolExecutor().tool({ name: 'slow', concurrencySafe: true }, async (input) => {
    await sleep(10 * input.n)
    return `done ${input.n}`
  })
  const turn = ex.turn()
  turn.submit(use('a', 'slow', { n: 1 }), use('b', 'slow', { n: 2 }))
  turn.seal()
  const abandoned = turn[Symbol.asyncIterator]()
  const first = await abandoned.next()
  assert.equal(first.done, false)
  const rest = []
  for await (const event of turn) rest.push(event.type)
  // The later loop gets the events the abandoned iterator left, the turn is not cancelled.
  assert.equal(rest.filter((type) => type === 'result').length, 2)
  assert.deepEqual((await turn.results()).map((r) => [r.content, r.is_error]), [
    ['done 1', false],
    ['done 2', false],
  ])
  // The abandoned iterator goes on from where the turn is: done.
  assert.deepEqual(await abandoned.next(), { done: true, value: undefined })
})

test('results() after an iterator was abandoned, or awaited inside the loop, settles', async () => {
  const ex = new ToolExecutor().tool({ name: 'slow', concurrencySafe: true }, async (input) => {
    await sleep(10 * input.n)
    return `done ${input.n}`
  })
  const turn = ex.turn()
  turn.submit(use('a', 'slow', { n: 1 }), use('b', 'slow', { n: 2 }))
  const abandoned = turn[Symbol.asyncIterator]()
  assert.equal((await abandoned.next()).done, false)
  const results = await settlesWithin(turn.results(), 'results() after an abandoned iterator')
  assert.deepEqual(results.map((r) => [r.content, r.is_error]), [
    ['done 1', false],
    ['done 2', false],
  ])
  const inside = ex.turn()
  inside.submit(use('c', 'slow', { n: 1 }))
  let within
  for await (const event of inside) if (event.type === 'started') within = await settlesWithin(inside.results(), 'results() inside the loop')
  assert.deepEqual(within.map((r) => [r.content, r.is_error]), [['done 1', false]])
})

test('submit given an array of tool uses says so, not that the id is missing', () => {
  // submit takes the uses as arguments (run takes an array): `submit(uses)` was refused as
  // "tool use 0 ... \`id\` is no string", sending the caller to check ids that were there.
  const turn = new ToolExecutor().tool({ name: 'a' }, () => 'x').turn()
  assert.throws(
    () => turn.submit([use('t1', 'a'), use('t2', 'a')]),
    (err) => err instanceof InvalidArgumentError && /tool use 0 is an array/.test(err.message) && /submit\(\.\.\.uses\)/.test(err.message),
  )
  turn.submit(...[use('t1', 'a'), use('t2', 'a')])
  turn.seal()
})

test('leaving the loop after the turn is done cancels nothing', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'ok' }, () => 'fine')
  const turn = ex.turn()
  turn.submit(use('a', 'ok'))
  turn.seal()
  await turn.results()
  for await (const event of turn) {
    if (event.type === 'started') break
  }
  const [a] = await turn.results()
  assert.deepEqual(a, { type: 'tool_result', tool_use_id: 'a', content: 'fine', is_error: false })
})

test("ctx.index is the call's position in its turn, as Python's ToolContext.index", async () => {
  const seen = new Map()
  const ex = new ToolExecutor()
    .tool({ name: 'plain', concurrencySafe: true }, (input, ctx) => {
      seen.set(ctx.toolUseId, ctx.index)
      return 'p'
    })
    .tool({ name: 'checked', concurrencySafe: true, schema: { type: 'object' } }, async (input, ctx) => {
      seen.set(ctx.toolUseId, ctx.index)
      return 'c'
    })
    // A call with a timeout starts through the tool host rather than by index.
    .tool({ name: 'timed', concurrencySafe: true, timeoutMs: 5000 }, async (input, ctx) => {
      seen.set(ctx.toolUseId, ctx.index)
      return 't'
    })
  const uses = ['plain', 'checked', 'plain', 'timed', 'checked', 'timed'].map((name, n) => use(`u${n}`, name))
  const expected = uses.map((u, n) => [u.id, n])
  await ex.run(uses)
  assert.deepEqual([...seen.entries()].sort(), expected)
  seen.clear()
  await turnResults(ex, uses)
  assert.deepEqual([...seen.entries()].sort(), expected)
})

test('a tool use without an input runs its tool with {}, as in Python and Anthropic\'s own loop', async () => {
  const ex = new ToolExecutor()
  const seen = []
  ex.tool({ name: 'plain' }, (input) => {
    seen.push(['plain', input])
    return 'ran'
  })
  ex.tool({ name: 'typed', schema: { type: 'object', properties: { path: { type: 'string' } } } }, (input) => {
    seen.push(['typed', input])
    return 'ran'
  })
  ex.tool({ name: 'picky', concurrencySafe: (input) => input.path === undefined }, (input) => {
    seen.push(['picky', input])
    return 'ran'
  })
  const results = await ex.run([
    { type: 'tool_use', id: 'a', name: 'plain' },
    { type: 'tool_use', id: 'b', name: 'typed' },
    { type: 'tool_use', id: 'c', name: 'picky' },
  ])
  assert.deepEqual(
    results.map((r) => [r.tool_use_id, r.is_error, r.content]),
    [
      ['a', false, 'ran'],
      ['b', false, 'ran'],
      ['c', false, 'ran'],
    ],
  )
  assert.deepEqual(seen, [
    ['plain', {}],
    ['typed', {}],
    ['picky', {}],
  ])
})

test('ctx.progress with a value JSON cannot carry throws InvalidArgumentError to the tool', async () => {
  const ex = new ToolExecutor()
  const cycle = {}
  cycle.self = cycle
  const thrown = []
  ex.tool({ name: 'report' }, (_input, ctx) => {
    for (const value of [10n, cycle, () => 1, Symbol('s'), new Map([['a', 1]]), { nested: new Map() }]) {
      try {
        ctx.progress(value)
        thrown.push(null)
      } catch (err) {
        thrown.push(err)
      }
    }
    ctx.progress({ ok: true })
    // A Set is sent as its items, as a Python tool's set is (it was sent as {}).
    ctx.progress({ seen: new Set(['a', 'b']) })
    return 'done'
  })
  const turn = ex.turn()
  turn.submit(use('a', 'report'))
  turn.seal()
  const events = []
  for await (const event of turn) events.push(event)
  assert.equal(thrown.length, 6)
  for (const err of thrown) {
    assert.ok(err instanceof InvalidArgumentError, `${err}`)
    assert.match(err.message, /ctx\.progress/)
  }
  assert.deepEqual(
    events.filter((e) => e.type === 'progress').map((e) => e.data),
    [{ ok: true }, { seen: ['a', 'b'] }],
  )
  assert.equal(events.find((e) => e.type === 'result').result.content, 'done')
})

test('a result holding a Set sends its items, as a Python tool\'s set; a Map is an is_error result, as in ctx.progress', async () => {
  // JSON.stringify wrote both as {}: the tool's data was lost, and the call reported success.
  const ex = new ToolExecutor()
    .tool({ name: 'set' }, () => new Set(['a', 'b']))
    .tool({ name: 'nested_set' }, async () => ({ files: new Set(['x.txt']) }))
    .tool({ name: 'explicit' }, () => ({ content: new Set(['c']) }))
    .tool({ name: 'map' }, () => new Map([['a', 1]]))
    .tool({ name: 'nested_map' }, async () => ({ counts: new Map([['a', 1]]) }))
    .tool({ name: 'blocks_map' }, () => [{ type: 'text', text: 'hi', meta: new Map() }])
  const results = await ex.run(['set', 'nested_set', 'explicit', 'map', 'nested_map', 'blocks_map'].map((name, i) => use(`t${i}`, name)))
  assert.deepEqual(
    results.slice(0, 3).map((r) => [r.content, r.is_error]),
    [
      ['["a","b"]', false],
      ['{"files":["x.txt"]}', false],
      ['["c"]', false],
    ],
  )
  for (const result of results.slice(3)) {
    assert.equal(result.is_error, true, result.content)
    assert.match(result.content, /^the tool's result cannot be sent as JSON: a Map is not a JSON value/)
  }
})

test('ctx may be destructured, progress included, whichever way the call runs (as Python\'s bound ctx.progress)', async () => {
  const ex = new ToolExecutor()
  const tool = async (input, { progress, signal, toolUseId, name, index }) => {
    progress({ toolUseId, name, index, aborted: signal.aborted })
    return `${name} ${toolUseId} ${index}`
  }
  // Without a timeout a call is started by index; with one, through the tool host.
  ex.tool({ name: 'plain', concurrencySafe: true }, tool)
  ex.tool({ name: 'timed', concurrencySafe: true, timeoutMs: 5000 }, tool)
  const turn = ex.turn()
  turn.submit(use('p', 'plain'))
  turn.submit(use('t', 'timed'))
  turn.seal()
  const events = []
  for await (const event of turn) events.push(event)
  assert.deepEqual(
    events.filter((e) => e.type === 'progress').map((e) => e.data).sort((a, b) => a.index - b.index),
    [
      { toolUseId: 'p', name: 'plain', index: 0, aborted: false },
      { toolUseId: 't', name: 'timed', index: 1, aborted: false },
    ],
  )
  const results = await turn.results()
  assert.deepEqual(
    results.map((r) => [r.content, r.is_error]),
    [
      ['plain p 0', false],
      ['timed t 1', false],
    ],
  )
})

test('an array of plain values is sent as its JSON text (not content blocks, which the providers refuse)', async () => {
  const ex = new ToolExecutor().tool({ name: 'files' }, (input) => input.items)
  const results = await ex.run([
    use('a', 'files', { items: ['a.txt', 'b.txt'] }),
    use('b', 'files', { items: [{ type: 'text', text: 'block' }] }),
  ])
  assert.deepEqual(
    results.map((r) => [r.content, r.is_error]),
    [
      ['["a.txt","b.txt"]', false],
      [[{ type: 'text', text: 'block' }], false],
    ],
  )
})

test('a tool that answered before the turn was cancelled keeps its answer (the order decides, not the poll)', async () => {
  const ex = new ToolExecutor()
  let turn
  // With a timeout, the call takes the native-future path. The tool answers at once; the turn is
  // cancelled a few microtasks later, after the answer reached the executor and before the
  // turn's next poll (its wake-up is a later macrotask).
  ex.tool({ name: 'timed', timeoutMs: 60_000 }, () => {
    let hops = 8
    const later = () => (--hops === 0 ? turn.cancel() : queueMicrotask(later))
    queueMicrotask(later)
    return 'done'
  })
  turn = ex.turn()
  turn.submit(use('a', 'timed'))
  turn.seal()
  const [result] = await turn.results()
  assert.deepEqual(result, { type: 'tool_result', tool_use_id: 'a', content: 'done', is_error: false })
})

test('a tool that returns after it saw its ctx.signal abort is still reported cancelled', async () => {
  const ex = new ToolExecutor({ cleanupGraceMs: 5_000 })
  let saw
  ex.tool({ name: 'timed', timeoutMs: 60_000 }, (_input, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        saw = ctx.signal.reason
        resolve('stopped')
      })
    })
  })
  const turn = ex.turn()
  turn.submit(use('a', 'timed'))
  turn.seal()
  const iterator = turn[Symbol.asyncIterator]()
  assert.equal((await iterator.next()).value.type, 'started')
  turn.cancel()
  const [result] = await turn.results()
  assert.ok(saw instanceof AbortError, 'the tool saw the abort')
  assert.equal(result.is_error, true)
  assert.match(result.content, /cancelled/)
})

test('turn.results() seals the turn, as Python\'s Turn.results() does: a later submit is refused', { timeout: 20_000 }, async () => {
  // It waited for a seal() that never came: the promise never settled.
  const ex = new ToolExecutor()
  ex.tool({ name: 'echo', concurrencySafe: true }, async ({ s }) => s)
  const turn = ex.turn()
  turn.submit(use('a', 'echo', { s: 'one' }))
  const pending = turn.results()
  // A misuse of the turn's state: `invalid_state`, as C's fl_turn_submit (it was invalid_argument).
  assert.throws(
    () => turn.submit(use('b', 'echo', { s: 'two' })),
    (err) => err instanceof InvalidStateError && err.code === 'invalid_state' && /sealed/.test(err.message),
  )
  assert.deepEqual((await pending).map((r) => r.content), ['one'])
  assert.deepEqual((await turn.results()).map((r) => r.content), ['one'])
})

test('a followed turn\'s results() have the turn budget applied, as Python\'s and C\'s do', async (t) => {
  // The results to send back: over the turn budget the largest is spilled, as from run(). After
  // following the events they came back unbudgeted (the result events' form).
  const fs = require('node:fs')
  const os = require('node:os')
  const spillDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferroloop-node-spill-'))
  t.after(() => fs.rmSync(spillDir, { recursive: true, force: true }))
  const ex = new ToolExecutor({ spillDir, turnBudgetChars: 8_500 })
  ex.tool({ name: 'text', concurrencySafe: true }, async ({ c }) => c.repeat(3_000))
  const turn = ex.turn()
  turn.submit(...[...'abc'].map((c, i) => use(`t${i}`, 'text', { c })))
  turn.seal()
  const streamed = []
  for await (const event of turn) if (event.type === 'result') streamed.push(event.result.content)
  assert.deepEqual(streamed, ['a', 'b', 'c'].map((c) => c.repeat(3_000)))
  const results = await turn.results()
  assert.match(results[0].content, /^<tool-output-truncated>/)
  assert.deepEqual(results.slice(1).map((r) => r.content), ['b'.repeat(3_000), 'c'.repeat(3_000)])
  assert.deepEqual(results.map((r) => r.tool_use_id), ['t0', 't1', 't2'])
})

test('sealing a sealed turn is a no-op, as in Python and C (fl_turn_seal)', async () => {
  const ex = new ToolExecutor()
  ex.tool({ name: 'echo', concurrencySafe: true }, async ({ s }) => s)
  const turn = ex.turn()
  turn.submit(use('a', 'echo', { s: 'one' }))
  turn.seal()
  turn.seal()
  assert.deepEqual((await turn.results()).map((r) => r.content), ['one'])
  turn.seal()
})

test('a tool returning NaN or ±Infinity, alone, as content or nested, sends null, as Python\'s nan', async () => {
  // JSON.stringify's rendering; Python sent the empty text of None for a nan returned alone.
  for (const value of [NaN, Infinity, -Infinity]) {
    const ex = new ToolExecutor()
      .tool({ name: 'alone' }, () => value)
      .tool({ name: 'wrapped' }, () => ({ content: value }))
      .tool({ name: 'nested' }, () => ({ score: value, list: [value] }))
    const results = await ex.run([use('a', 'alone'), use('b', 'wrapped'), use('c', 'nested')])
    assert.deepEqual(results.map((r) => [r.content, r.is_error]), [
      ['null', false],
      ['null', false],
      ['{"score":null,"list":[null]}', false],
    ])
  }
})
