'use strict'
// The addon as a JavaScript agent runtime hosts it: AbortSignal reuse, early exits from
// iterations, worker threads that come and go, and processes that must exit by themselves.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Client, ToolExecutor, Agent } = require('../lib/index.js')
const { serveScript, anthropicEvents } = require('./replay.js')

const pkgDir = path.resolve(__dirname, '..')
const request = { model: 'replay', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
const hello = () => ({ body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, world' }]) } })

/** Runs `script` in a fresh `node` (the package path as `pkg`); its status, signal and output. */
function runNode(script, { timeout = 30_000, args = [] } = {}) {
  const source = `const pkg = ${JSON.stringify(path.join(pkgDir, 'lib', 'index.js'))};\n${script}`
  return spawnSync(process.execPath, [...args, '-e', source], { encoding: 'utf8', timeout })
}

/**
 * Asserts that the child process `run` (of runNode) exited by itself with code 0, printing
 * `stdout`, and that nothing on its stderr is a panic, a V8 fatal error or a failed assertion.
 */
function assertSurvived(run, stdout) {
  assert.equal(run.signal, null, `the process died of ${run.signal}: ${run.stderr}`)
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout.trim(), stdout)
  assert.doesNotMatch(run.stderr, /panicked|FATAL|Assertion/, run.stderr)
}

/** Collects the warnings the process emits while `fn` runs. */
async function warningsDuring(fn) {
  const warnings = []
  const onWarning = (warning) => warnings.push(warning)
  process.on('warning', onWarning)
  try {
    await fn()
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', onWarning)
  }
  return warnings
}

test('one AbortSignal reused for many requests left early adds no lasting listener', async () => {
  const server = await serveScript({ responses: [hello()], when_exhausted: 'repeat_last' })
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url, fromEnv: false })
    const controller = new AbortController()
    const warnings = await warningsDuring(async () => {
      for (let i = 0; i < 30; i++) {
        const stream = client.stream(request, { signal: controller.signal })
        for await (const _ of stream) break
        await assert.rejects(stream.message(), { name: 'AbortError' })
      }
      for (let i = 0; i < 30; i++) {
        const stream = client.stream(request, { signal: controller.signal })
        stream.abort()
        await assert.rejects(stream.message(), { name: 'AbortError' })
      }
    })
    assert.deepEqual(
      warnings.map((w) => w.name),
      [],
      warnings.map((w) => w.message).join('\n'),
    )
  } finally {
    await server.close()
  }
})

test('aborting after the response arrived but before it was read rejects with AbortError, like fetch', async () => {
  const server = await serveScript({ responses: [hello()], when_exhausted: 'repeat_last' }, { log: true })
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url, fromEnv: false })
    const settle = async (n) => {
      // The whole response is in the native queue, unread, once the server logged the request
      // and a moment passed.
      await server.waitForRequests(n)
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    const stream = client.stream(request)
    await settle(1)
    stream.abort()
    await assert.rejects(stream.message(), { name: 'AbortError', code: 'aborted' })

    const controller = new AbortController()
    const viaSignal = client.stream(request, { signal: controller.signal })
    await settle(2)
    const reason = new Error('user went away')
    controller.abort(reason)
    const err = await viaSignal.message().then(
      () => assert.fail('resolved after the abort'),
      (e) => e,
    )
    assert.equal(err.name, 'AbortError')
    assert.equal(err.cause, reason, 'the signal\'s reason is the cause')

  } finally {
    await server.close()
  }
})

test('workers that load the addon one after the other, and are terminated mid-run, do not crash the process', async () => {
  // The main thread never loads the addon: each worker's exit unloads it, the next loads it
  // again (a segmentation fault in the allocator's thread setup, before the fix). Each worker is
  // terminated with a stream, an agent run and tool calls in flight (Promises the native side
  // settles while the worker's environment shuts down: an abort in a debug build, before).
  const stalled = await serveScript({
    responses: [{ body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, world' }]) }, fault: { kind: 'stall_after', bytes: 400, ms: 60000 } }],
    when_exhausted: 'repeat_last',
  })
  const quick = await serveScript({ responses: [hello()], when_exhausted: 'repeat_last' })
  try {
    const script = `
      const { Worker } = require('node:worker_threads')
      const source = \`
        const { parentPort, workerData } = require('node:worker_threads')
        const { ToolExecutor, SseParser, Client, Agent } = require(workerData.pkg)
        new SseParser().feed(Buffer.from('data: x\\\\n\\\\n'))
        const request = { model: 'replay', max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] }
        const executor = new ToolExecutor()
          .tool({ name: 'never', concurrencySafe: true }, () => new Promise(() => {}))
          .tool({ name: 'quick', concurrencySafe: true }, async () => 'ok')
        executor.run([{ id: 'a', name: 'never', input: {} }]).catch(() => {})
        setInterval(() => executor.run([{ id: 'b', name: 'quick', input: {} }]), 1)
        const stalled = new Client({ apiKey: 'k', baseUrl: workerData.stalled, fromEnv: false })
        stalled.stream(request).message().catch(() => {})
        const quick = new Client({ apiKey: 'k', baseUrl: workerData.quick, fromEnv: false })
        setInterval(() => quick.stream(request).message().catch(() => {}), 2)
        setInterval(() => new Agent(quick, { model: 'replay' }).run('Hi').result().catch(() => {}), 3)
        executor.run([{ id: 'c', name: 'quick', input: {} }]).then(() => parentPort.postMessage('running'))
      \`
      ;(async () => {
        for (let i = 0; i < 8; i++) {
          const worker = new Worker(source, { eval: true, workerData: { pkg, stalled: ${JSON.stringify(stalled.url)}, quick: ${JSON.stringify(quick.url)} } })
          await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject) })
          await new Promise((resolve) => setTimeout(resolve, 20 + 10 * i))
          await worker.terminate()
        }
        const { ToolExecutor } = require(pkg)
        const results = await new ToolExecutor().tool({ name: 't' }, () => 'main').run([{ id: 'm', name: 't', input: {} }])
        console.log(results[0].content)
      })()
    `
    const run = runNode(script, { args: ['--unhandled-rejections=strict'], timeout: 60_000 })
    assertSurvived(run, 'main')
  } finally {
    await stalled.close()
    await quick.close()
  }
})

test('a worker terminated while its JS runs inside a native callback (a tool, a concurrency predicate) does not abort the process', async () => {
  // Termination stops the worker's JavaScript wherever it is. When that is inside a function the
  // addon called from its runtime (an agent's tool starting, a per-input concurrencySafe
  // predicate), the call fails with a status napi-rs's thread-safe function asserted could not
  // happen: a panic in an extern "C" callback, which aborts the whole process (the parent too).
  const toolTurn = anthropicEvents(
    [
      { type: 'tool_use', id: 'toolu_a', name: 'spin', input: { k: 1 } },
      { type: 'tool_use', id: 'toolu_b', name: 'spin', input: { k: 2 } },
    ],
    { stopReason: 'tool_use' },
  )
  const server = await serveScript({ responses: [{ body: { events: toolTurn } }], when_exhausted: 'repeat_last' })
  try {
    const script = `
      const { Worker } = require('node:worker_threads')
      const source = \`
        const { parentPort, workerData } = require('node:worker_threads')
        const { Client, Agent, ToolExecutor } = require(workerData.pkg)
        const spin = () => { parentPort.postMessage('spinning'); for (;;) {} }
        const where = workerData.where
        const tools = new ToolExecutor().tool(
          { name: 'spin', concurrencySafe: where === 'predicate' ? () => spin() : true },
          where === 'tool' ? () => spin() : async () => 'ok',
        )
        const client = new Client({ apiKey: 'k', baseUrl: workerData.url, fromEnv: false })
        new Agent(client, { model: 'replay', tools: [tools] }).run('go').result().catch(() => {})
      \`
      ;(async () => {
        for (const where of ['tool', 'predicate']) {
          for (let i = 0; i < 3; i++) {
            const worker = new Worker(source, { eval: true, workerData: { pkg, url: ${JSON.stringify(server.url)}, where } })
            await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject) })
            await worker.terminate()
          }
        }
        console.log('survived')
      })()
    `
    const run = runNode(script, { args: ['--unhandled-rejections=strict'], timeout: 60_000 })
    assertSurvived(run, 'survived')
  } finally {
    await server.close()
  }
})

test('a worker terminated while native calls throw in a loop does not abort the process', () => {
  // Termination leaves an exception pending in the worker: a native method that fails then
  // cannot throw its error, and napi-rs (in a debug build, the one the suites test) asserted
  // that it could, a panic across the FFI boundary that aborted the whole process.
  const script = `
    const { Worker } = require('node:worker_threads')
    const source = \`
      const { parentPort, workerData } = require('node:worker_threads')
      const { StreamDecoder, countTokens } = require(workerData.pkg)
      const bad = Buffer.from('event: content_block_delta\\\\ndata: {"type":"content_block_delta","index":0}\\\\n\\\\n')
      let told = false
      for (;;) {
        try { new StreamDecoder().feed(bad) } catch {}
        try { countTokens('hi', 'claude') } catch {}
        if (!told) { told = true; parentPort.postMessage('looping') }
      }
    \`
    ;(async () => {
      for (let i = 0; i < 10; i++) {
        const worker = new Worker(source, { eval: true, workerData: { pkg } })
        await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject) })
        await new Promise((resolve) => setTimeout(resolve, i))
        await worker.terminate()
      }
      console.log('survived')
    })()
  `
  const run = runNode(script, { args: ['--unhandled-rejections=strict'], timeout: 60_000 })
  assertSurvived(run, 'survived')
})

test('the declarations match the runtime: every declared export, method and field exists, every public item has JSDoc', () => {
  const ts = require('typescript')
  const fs = require('node:fs')
  const ferroloop = require('../lib/index.js')
  const file = path.join(pkgDir, 'lib', 'index.d.ts')
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
  const hasDoc = (node) => ts.getJSDocCommentsAndTags(node).length > 0
  const undocumented = []
  const missing = []
  const declared = new Set()
  /** An instance of a declared class, for the fields set by constructors (errors only). */
  const instanceOf = (cls) => (cls.prototype instanceof ferroloop.FerroloopError || cls === ferroloop.FerroloopError ? new cls('x') : null)
  for (const statement of source.statements) {
    const name = statement.name?.text
    if (!hasDoc(statement)) undocumented.push(name)
    if (ts.isInterfaceDeclaration(statement)) {
      for (const member of statement.members) if (!hasDoc(member)) undocumented.push(`${name}.${member.name?.getText(source)}`)
    }
    if (!ts.isClassDeclaration(statement) && !ts.isFunctionDeclaration(statement)) continue
    declared.add(name)
    const value = ferroloop[name]
    if (typeof value !== 'function') {
      missing.push(name)
      continue
    }
    if (!ts.isClassDeclaration(statement)) continue
    const instance = instanceOf(value)
    for (const member of statement.members) {
      if (ts.isConstructorDeclaration(member)) continue
      if (member.modifiers?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)) continue
      const text = member.name.getText(source)
      if (!hasDoc(member)) undocumented.push(`${name}.${text}`)
      const key = text === '[Symbol.asyncIterator]' ? Symbol.asyncIterator : text
      const where = instance ?? value.prototype
      if (!(key in where)) {
        missing.push(`${name}.${text}`)
      } else if (ts.isMethodDeclaration(member) && typeof where[key] !== 'function') {
        missing.push(`${name}.${text} (not a method)`)
      }
    }
  }
  assert.deepEqual(missing, [], 'declared but absent at runtime')
  assert.deepEqual(undocumented, [], 'public declarations without JSDoc')
  // Nothing exported at runtime is left undeclared.
  assert.deepEqual(Object.keys(ferroloop).filter((key) => !declared.has(key)), [])
  // The error fields the declarations promise, on a native error and on a constructed one.
  const err = ferroloop.toFerroloopError(new Error('[ferroloop:rate_limited:429:req_1] slow down'))
  assert.ok(err instanceof ferroloop.RateLimitedError)
  assert.deepEqual([err.code, err.status, err.requestId, err.name], ['rate_limited', 429, 'req_1', 'RateLimitedError'])
  const cause = new Error('root')
  assert.equal(new ferroloop.ConnectionError('x', { cause }).cause, cause)
})

test('a tool that throws a non-Error or returns what JSON cannot carry gets a clear is_error result', async () => {
  const circular = {}
  circular.self = circular
  const cases = {
    throws_undefined: [() => Promise.reject(undefined), /^the tool threw undefined$/],
    throws_null: [() => { throw null }, /^the tool threw null$/],
    throws_number: [() => Promise.reject(42), /^the tool threw 42$/],
    throws_plain_object: [() => { throw { code: 'E_BUSY', retry: true } }, /^the tool threw \{"code":"E_BUSY","retry":true\}$/],
    throws_string: [() => { throw 'disk full' }, /^disk full$/],
    returns_bigint: [() => 10n, /^the tool's result cannot be sent as JSON: .*BigInt/],
    returns_object_with_bigint: [async () => ({ size: 10n }), /^the tool's result cannot be sent as JSON: .*BigInt/],
    returns_circular: [() => circular, /^the tool's result cannot be sent as JSON: .*circular/i],
    returns_circular_blocks: [() => [circular], /^the tool's result cannot be sent as JSON: .*circular/i],
    returns_function: [() => function later() {}, /^the tool returned a function, not a result/],
    returns_symbol: [() => Symbol('x'), /^the tool returned a symbol, not a result/],
  }
  const executor = new ToolExecutor()
  for (const [name, [fn]] of Object.entries(cases)) executor.tool({ name, concurrencySafe: true }, fn)
  executor.tool({ name: 'returns_undefined' }, () => undefined)
  const uses = [...Object.keys(cases), 'returns_undefined'].map((name) => ({ id: `id_${name}`, name, input: {} }))
  const check = (results) => {
    for (const [i, name] of Object.keys(cases).entries()) {
      assert.equal(results[i].is_error, true, `${name}: ${JSON.stringify(results[i])}`)
      assert.match(results[i].content, cases[name][1], name)
    }
    // Undefined is documented as an empty (successful) result.
    assert.deepEqual(results.at(-1), { type: 'tool_result', tool_use_id: 'id_returns_undefined', content: '', is_error: false })
  }
  check(await executor.run(uses))
  const turn = executor.turn()
  turn.submit(...uses)
  turn.seal()
  check(await turn.results())
})

test("a result whose toJSON() gives undefined is an is_error result, not '[object Object]'", async () => {
  // It was sent as the text "[object Object]", marked a success.
  const executor = new ToolExecutor()
    .tool({ name: 'undefined_toJSON' }, () => ({ toJSON() { return undefined } }))
    .tool({ name: 'async_undefined_toJSON' }, async () => ({ toJSON: () => undefined }))
    .tool({ name: 'null_toJSON' }, () => ({ toJSON: () => null }))
  const uses = ['undefined_toJSON', 'async_undefined_toJSON', 'null_toJSON'].map((name) => ({ id: name, name, input: {} }))
  const check = (results) => {
    for (const result of results.slice(0, 2)) {
      assert.equal(result.is_error, true, JSON.stringify(result))
      assert.match(result.content, /^the tool returned a value that has no JSON form/)
    }
    // A toJSON() that gives a JSON value is that value's text.
    assert.deepEqual(results[2], { type: 'tool_result', tool_use_id: 'null_toJSON', content: 'null', is_error: false })
  }
  check(await executor.run(uses))
  const turn = executor.turn()
  turn.submit(...uses)
  turn.seal()
  check(await turn.results())
})

test("aborting run() hands the signal's reason to the tools too: ctx.signal.reason.cause, like fetch", async () => {
  const seen = []
  const executor = new ToolExecutor({ cleanupGraceMs: 200 }).tool({ name: 'watch', concurrencySafe: true }, (_input, ctx) => {
    return new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => {
        seen.push(ctx.signal.reason)
        resolve('stopped')
      })
    })
  })
  const uses = [
    { id: 'a', name: 'watch', input: {} },
    { id: 'b', name: 'watch', input: {} },
  ]
  const controller = new AbortController()
  const reason = new Error('the user pressed Ctrl-C')
  setTimeout(() => controller.abort(reason), 30)
  await assert.rejects(executor.run(uses, { signal: controller.signal }), (err) => err.name === 'AbortError' && err.cause === reason)
  assert.equal(seen.length, 2)
  for (const toolReason of seen) {
    assert.equal(toolReason.name, 'AbortError')
    assert.equal(toolReason.cause, reason, 'the tool sees why the run was aborted')
  }
  // AbortSignal.timeout(): the tools see its TimeoutError (a DOMException) as the cause. Its
  // timer is unref'd (Node's choice) and these tools wait on nothing else, so, as with plain
  // promises, nothing would keep the process alive meanwhile: the test holds the loop.
  seen.length = 0
  const hold = setInterval(() => {}, 1_000)
  try {
    await assert.rejects(executor.run(uses, { signal: AbortSignal.timeout(30) }), { name: 'AbortError' })
  } finally {
    clearInterval(hold)
  }
  assert.equal(seen.length, 2)
  for (const toolReason of seen) assert.equal(toolReason.cause?.name, 'TimeoutError')
})

test('an already-aborted signal sends no request: Agent.run stops with reason aborted, Client.stream/create reject', async () => {
  const server = await serveScript({ responses: [hello()], when_exhausted: 'repeat_last' }, { log: true })
  try {
    const client = new Client({ apiKey: 'test-key', baseUrl: server.url, fromEnv: false })
    const agent = new Agent(client, { model: 'replay' })
    const reason = new Error('cancelled before it started')
    for (let i = 0; i < 10; i++) {
      const stop = await agent.run('Hi', { signal: AbortSignal.abort(reason) }).result()
      assert.equal(stop.reason, 'aborted')
      assert.deepEqual(stop.messages, [{ role: 'user', content: 'Hi' }])
      await assert.rejects(client.stream(request, { signal: AbortSignal.abort(reason) }).message(), (err) => err.name === 'AbortError' && err.cause === reason)
      await assert.rejects(client.create(request, { signal: AbortSignal.abort(reason) }), (err) => err.name === 'AbortError' && err.cause === reason)
    }
    // A request that is made shows up in the log: make one, so that the count is not just lag.
    await client.stream(request).message()
    const logged = await server.waitForRequests(1)
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.equal(logged.length, 1, 'only the request made without an aborted signal reached the server')
  } finally {
    await server.close()
  }
})

test('a StreamTruncatedError has the breaking failure as its cause (Python: __cause__)', async () => {
  const stalled = { body: { events: anthropicEvents([{ type: 'text', text: 'Hello there, world' }]) }, fault: { kind: 'stall_after', bytes: 400, ms: 10000 } }
  const server = await serveScript({ responses: [stalled], when_exhausted: 'repeat_last' })
  try {
    const client = new Client({ apiKey: 'k', baseUrl: server.url, fromEnv: false, maxRetries: 0, timeouts: { idleMs: 200 } })
    const err = await client.stream(request).message().then(
      () => assert.fail('resolved'),
      (e) => e,
    )
    assert.equal(err.name, 'StreamTruncatedError')
    assert.equal(err.reason, 'timeout')
    assert.ok(err.cause instanceof require('../lib/index.js').TimeoutError, `cause: ${err.cause}`)
    assert.equal(err.cause.code, 'timeout')
    assert.match(err.cause.message, /idle|event|timed out|timeout/i)
  } finally {
    await server.close()
  }
})
