'use strict'
// The Rust ↔ JS tool-call mechanics the executor is built on: a JS tool's Promise awaited from
// Rust, errors as is_error replies, a Rust-side timeout reaching the tool's AbortSignal.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const native = require('../index.js')
const { ToolHost, toReply } = require('../lib/tool-host.js')
const { TimeoutError } = require('../lib/errors.js')

function call(host, name, input, timeoutMs) {
  return native._bridgeCall(host.invoke, host.abort, name, JSON.stringify(input), timeoutMs)
}

test('sync and async tools reply; results are normalized', async () => {
  const host = new ToolHost()
  host.register('sync', (input) => `sync ${input.x}`)
  host.register('async', async (input) => [{ type: 'text', text: `async ${input.x}` }])
  host.register('explicit', async () => ({ content: 'bad input', isError: true }))
  assert.deepEqual(await call(host, 'sync', { x: 1 }), { content: 'sync 1', contentIsJson: false, isError: false })
  assert.deepEqual(await call(host, 'async', { x: 2 }), {
    content: '[{"type":"text","text":"async 2"}]',
    contentIsJson: true,
    isError: false,
  })
  assert.deepEqual(await call(host, 'explicit', {}), { content: 'bad input', contentIsJson: false, isError: true })
  assert.deepEqual(toReply(42), { content: '42', contentIsJson: false, isError: false })
})

test('a throwing, rejecting or unknown tool becomes an is_error reply', async () => {
  const host = new ToolHost()
  host.register('throws', () => {
    throw new Error('sync failure')
  })
  host.register('rejects', async () => {
    throw new RangeError('async failure')
  })
  assert.deepEqual(await call(host, 'throws', {}), { content: 'sync failure', contentIsJson: false, isError: true })
  assert.deepEqual(await call(host, 'rejects', {}), { content: 'async failure', contentIsJson: false, isError: true })
  const unknown = await call(host, 'missing', {})
  assert.equal(unknown.isError, true)
  assert.match(unknown.content, /no such tool: missing/)
})

test('a Rust-side timeout aborts the JS tool through ctx.signal', async () => {
  const host = new ToolHost()
  let seenReason = null
  host.register('slow', (_input, { signal }) => {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve('too late'), 10_000)
      signal.addEventListener('abort', () => {
        clearTimeout(timer)
        seenReason = signal.reason
        reject(signal.reason)
      })
    })
  })
  host.register('never', () => new Promise(() => {}))
  const slow = await call(host, 'slow', {}, 50)
  assert.equal(slow.isError, true)
  assert.match(slow.content, /timed out after 50 ms/)
  // The abort reaches JS shortly after the Rust side gave up.
  for (let i = 0; i < 100 && seenReason === null; i++) await new Promise((r) => setTimeout(r, 5))
  assert.ok(seenReason instanceof Error, 'the tool saw the abort')
  assert.equal(host.running.size, 0)
  const never = await call(host, 'never', {}, 20)
  assert.equal(never.isError, true)
  assert.ok(seenReason instanceof TimeoutError || seenReason.name === 'AbortError')
})

test('a never-settling tool does not keep the process alive', () => {
  const script = `
    const native = require(${JSON.stringify(path.join(__dirname, '..', 'index.js'))})
    const { ToolHost } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'tool-host.js'))})
    const host = new ToolHost()
    host.register('never', () => new Promise(() => {}))
    native._bridgeCall(host.invoke, host.abort, 'never', '{}', 30).then((r) => console.log(r.isError))
  `
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.signal, null, 'had to be killed')
  assert.equal(run.status, 0, run.stderr)
  assert.equal(run.stdout.trim(), 'true')
})
