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
