// ESM and CommonJS load the same addon; worker_threads load it too.
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import * as esm from '../lib/index.mjs'
import esmDefault from '../lib/index.mjs'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const pkgDir = path.resolve(here, '..')

test('ESM and CommonJS expose the same classes', () => {
  const cjs = require('../lib/index.js')
  assert.equal(esm.SseParser, cjs.SseParser)
  assert.equal(esm.FerroloopError, cjs.FerroloopError)
  assert.equal(typeof cjs.InvalidStateError, 'function')
  assert.equal(esm.InvalidStateError, cjs.InvalidStateError)
  assert.equal(new esm.InvalidStateError('x').code, 'invalid_state')
  assert.equal(esmDefault, cjs)
  const events = new esm.SseParser().feed(new TextEncoder().encode('data: esm\n\n'))
  assert.deepEqual(events, [{ event: 'message', data: 'esm', id: '' }])
})

test('ESM and CommonJS export the same Client, Agent and executor classes', () => {
  const cjs = require('../lib/index.js')
  for (const name of ['Client', 'MessageStream', 'Agent', 'AgentRun', 'ToolExecutor', 'Turn', 'StreamDecoder', 'countTokens']) {
    assert.equal(typeof cjs[name], 'function', `CommonJS exports ${name}`)
    assert.equal(esm[name], cjs[name], `ESM exports the same ${name}`)
    assert.equal(esmDefault[name], cjs[name])
  }
})

test('Client and Agent work in worker_threads, against the replay server', async () => {
  const { startServer } = require('./replay.js')
  const server = await startServer(['--agent-model'])
  try {
    const source = `
      const { parentPort, workerData } = require('node:worker_threads')
      const path = require('node:path')
      const { Client, Agent, ToolExecutor } = require(path.join(workerData.pkgDir, 'lib', 'index.js'))
      ;(async () => {
        const client = new Client({ apiKey: 'test-key', baseUrl: workerData.url, retryBaseDelayMs: 1 })
        const stream = client.stream({ model: 'ferroloop-replay', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
        let deltas = 0
        for await (const event of stream) if (event.type === 'text_delta') deltas++
        const message = await stream.message()
        const executor = new ToolExecutor()
        for (const name of ['glob', 'grep', 'read']) {
          executor.tool({ name, concurrencySafe: true }, async (input) => name + ' result for ' + JSON.stringify(input))
        }
        const agent = new Agent(client, { model: 'ferroloop-replay', tools: executor })
        const stop = await agent.run('Explore this directory.').result()
        parentPort.postMessage({ role: message.role, deltas, reason: stop.reason, toolCalls: stop.toolCalls })
      })().catch((err) => parentPort.postMessage({ error: String(err && err.stack || err) }))
    `
    const run = () =>
      new Promise((resolve, reject) => {
        const worker = new Worker(source, { eval: true, workerData: { pkgDir, url: server.url } })
        worker.once('message', resolve)
        worker.once('error', reject)
        worker.once('exit', (code) => {
          if (code !== 0) reject(new Error(`worker exited with ${code}`))
        })
      })
    const outcomes = await Promise.all([run(), run()])
    for (const outcome of outcomes) {
      assert.equal(outcome.error, undefined, outcome.error)
      assert.equal(outcome.role, 'assistant')
      assert.equal(outcome.reason, 'end_turn')
      assert.ok(outcome.toolCalls >= 3, `${outcome.toolCalls} tool calls`)
    }
  } finally {
    await server.close()
  }
})

test('the package name resolves through its exports map in both module systems', () => {
  const script = [
    "const cjs = require('ferroloop');",
    "import('ferroloop').then((m) => {",
    "  if (m.SseParser !== cjs.SseParser) throw new Error('mismatch');",
    "  process.stdout.write(String(new m.SseParser().feed(Buffer.from('data: x\\n\\n')).length));",
    '});',
  ].join('\n')
  // Resolve `ferroloop` from the package directory itself (self-reference through "exports").
  const run = spawnSync(process.execPath, ['-e', script], { cwd: pkgDir, encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout, '1')
})

function runWorker(source) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(source, { eval: true, workerData: { pkgDir } })
    worker.once('message', resolve)
    worker.once('error', reject)
    worker.once('exit', (code) => {
      if (code !== 0) reject(new Error(`worker exited with ${code}`))
    })
  })
}

test('the addon works in worker_threads, several at once, and alongside the main thread', async () => {
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const path = require('node:path')
    const { SseParser, _debugPanic, InternalError } = require(path.join(workerData.pkgDir, 'lib', 'index.js'))
    const parser = new SseParser()
    const events = []
    for (const byte of Buffer.from('event: w\\ndata: from worker\\n\\n')) events.push(...parser.feed(Buffer.from([byte])))
    let panicCaught = false
    try { _debugPanic('in worker') } catch (err) { panicCaught = err instanceof InternalError }
    // The executor inside the worker: JS tools, and a timeout (an async-runtime timer waking
    // the turn through its thread-safe function).
    const { ToolExecutor } = require(path.join(workerData.pkgDir, 'lib', 'index.js'))
    const executor = new ToolExecutor({ cleanupGraceMs: 20 })
    executor.tool({ name: 'inc', concurrencySafe: true }, async ({ n }) => String(n + 1))
    executor.tool({ name: 'never', concurrencySafe: true, timeoutMs: 20 }, () => new Promise(() => {}))
    executor
      .run([{ id: 'a', name: 'inc', input: { n: 1 } }, { id: 'b', name: 'inc', input: { n: 2 } }, { id: 'c', name: 'never', input: {} }])
      .then((results) => {
        parentPort.postMessage({ events, panicCaught, results: results.map((r) => [r.content, r.is_error]) })
      })
  `
  const results = await Promise.all([runWorker(source), runWorker(source), runWorker(source)])
  for (const result of results) {
    assert.deepEqual(result.events, [{ event: 'w', data: 'from worker', id: '' }])
    assert.equal(result.panicCaught, true)
    assert.deepEqual(result.results.slice(0, 2), [['2', false], ['3', false]])
    assert.equal(result.results[2][1], true)
    assert.match(result.results[2][0], /timed out/)
  }
  const { SseParser } = require('../lib/index.js')
  assert.equal(new SseParser().feed(Buffer.from('data: main\n\n'))[0].data, 'main')
})

test('a process using the addon exits by itself (no dangling handles)', () => {
  const script = `
    const { SseParser } = require(${JSON.stringify(path.join(pkgDir, 'lib', 'index.js'))})
    const p = new SseParser()
    p.feed(Buffer.from('data: x\\n\\n'))
    p.feed(Buffer.from('data: unterminated'))
  `
  const started = Date.now()
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.signal, null, 'process had to be killed: something kept it alive')
  assert.equal(run.status, 0, run.stderr)
  assert.ok(Date.now() - started < 20_000)
})

test('the README quickstart is the example file that runs', async () => {
  const { readFileSync } = await import('node:fs')
  const readme = readFileSync(path.join(pkgDir, '..', 'README.md'), 'utf8')
  const block = readme.match(/```js\n\/\/ node\/examples\/quickstart\.mjs[^\n]*\n([\s\S]*?)```/)
  assert.ok(block, 'the README quickstart block (it names node/examples/quickstart.mjs)')
  // Its code lines (comment lines aside) are the file's, in the same order.
  const code = (text) => text.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('//'))
  const example = code(readFileSync(path.join(pkgDir, 'examples', 'quickstart.mjs'), 'utf8'))
  assert.deepEqual(code(block[1]), example)
})

test('the README quickstart example runs', () => {
  const run = spawnSync(process.execPath, [path.join(pkgDir, 'examples', 'quickstart.mjs')], {
    cwd: pkgDir,
    encoding: 'utf8',
    timeout: 20_000,
  })
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout.split('\n')[0], 'tool_use 2')
  assert.match(run.stdout, /tool_use_id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn'/)
  assert.match(run.stdout, /content: 'Sunny in Paris'/)
  assert.match(run.stdout, /is_error: false/)
})

test("the package README's SSE example runs and prints what its comments say", async () => {
  const { readFileSync, writeFileSync, rmSync } = await import('node:fs')
  const readme = readFileSync(path.join(pkgDir, 'README.md'), 'utf8')
  const block = readme.match(/```js\n(const \{ SseParser \} = require\('ferroloop'\)[\s\S]*?)```/)
  assert.ok(block, "node/README.md's SSE block (it starts with require('ferroloop'))")
  // In the package directory, so that its `require('ferroloop')` resolves to this package.
  const file = path.join(pkgDir, 'examples', `.readme-sse-${process.pid}.cjs`)
  writeFileSync(file, block[1])
  try {
    const run = spawnSync(process.execPath, [file], { cwd: pkgDir, encoding: 'utf8', timeout: 20_000 })
    assert.equal(run.status, 0, run.stderr)
    assert.equal(run.stdout, "ping {} \n[ { event: 'message', data: 'more', id: '' } ]\n")
  } finally {
    rmSync(file, { force: true })
  }
})

test('the README client and agent example runs against the replay server', async () => {
  const { readFileSync, writeFileSync, rmSync } = await import('node:fs')
  const { startServer } = require('./replay.js')
  const readme = readFileSync(path.join(pkgDir, '..', 'README.md'), 'utf8')
  const block = readme.match(/The client and the agent loop \(the test suite runs this block[\s\S]*?\n\n```js\n([\s\S]*?)```/)
  assert.ok(block, 'the README block after "The client and the agent loop (the test suite runs this block"')
  // In the package directory, so that its `import ... from 'ferroloop'` resolves to this package.
  const file = path.join(pkgDir, 'examples', `.readme-agent-${process.pid}.mjs`)
  // The server first: a server that fails to start left the example file behind.
  const server = await startServer(['--agent-model'])
  writeFileSync(file, block[1])
  try {
    // The example reads ANTHROPIC_API_KEY; the client reads ANTHROPIC_BASE_URL (fromEnv).
    const run = spawnSync(process.execPath, [file], {
      cwd: pkgDir,
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, ANTHROPIC_API_KEY: 'replay', ANTHROPIC_BASE_URL: server.url },
    })
    assert.equal(run.status, 0, run.stderr)
    assert.match(run.stdout, /end_turn \d+\n$/)
  } finally {
    rmSync(file, { force: true })
    server.close()
  }
})
