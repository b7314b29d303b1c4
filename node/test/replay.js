'use strict'
// The loopback replay server (`ferroloop serve-replay`, built by scripts/test-node.sh) for the
// client and agent suites: a script in, a base URL out; `close()` ends its stdin, which stops it.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { repoRoot } = require('./helpers.js')

const ferroloopBin =
  process.env.FERROLOOP_BIN ?? path.join(process.env.CARGO_TARGET_DIR ?? path.join(repoRoot, 'target'), 'debug', 'ferroloop')

/**
 * Starts `ferroloop serve-replay` with `args` (e.g. `['--script', file]`); resolves with
 * `{ url, requests, close }` once the banner line arrived. With `log`, `requests` collects the
 * requests the server received.
 */
function startServer(args, { log = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(ferroloopBin, ['serve-replay', '--idle-exit-ms', '60000', ...(log ? ['--log-requests'] : []), ...args], {
      cwd: repoRoot,
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const requests = []
    const waiters = []
    const lines = readline.createInterface({ input: child.stdout })
    let started = false
    child.once('error', reject)
    child.once('exit', (code) => {
      if (!started) reject(new Error(`serve-replay exited with ${code} before its banner`))
    })
    lines.on('line', (line) => {
      const value = JSON.parse(line)
      if (!started) {
        started = true
        resolve({
          url: value.url,
          requests,
          /** Resolves with the logged requests once at least `n` arrived (the log lags the responses). */
          waitForRequests: (n) =>
            new Promise((done) => {
              if (requests.length >= n) done(requests)
              else waiters.push({ n, done })
            }),
          close: () =>
            new Promise((done) => {
              if (child.exitCode !== null) return done()
              child.once('exit', () => done())
              child.stdin.end()
            }),
        })
      } else if (value.request !== undefined) {
        requests.push(value.request)
        for (const waiter of waiters.filter((w) => requests.length >= w.n)) {
          waiters.splice(waiters.indexOf(waiter), 1)
          waiter.done(requests)
        }
      }
    })
  })
}

let scriptCount = 0

/** The value of header `name` in a logged request (`headers` is a list of [name, value]). */
function header(request, name) {
  return request.headers.find(([key]) => key === name)?.[1]
}

/** Starts a server for a script object (`{ responses, when_exhausted }`). */
async function serveScript(script, options) {
  const file = path.join(os.tmpdir(), `ferroloop-node-${process.pid}-${scriptCount++}.json`)
  fs.writeFileSync(file, JSON.stringify(script))
  const server = await startServer(['--script', file], options)
  const close = server.close
  server.close = async () => {
    await close()
    fs.rmSync(file, { force: true })
  }
  return server
}

/**
 * An Anthropic SSE body (`{ events: [...] }` of the replay script) for a complete message: text
 * and thinking streamed in deltas, tool inputs as one `input_json_delta`, other blocks whole.
 */
function anthropicEvents(content, { stopReason = 'end_turn', id = 'msg_test', usage = { input_tokens: 10, output_tokens: 5 } } = {}) {
  const events = [
    {
      event: 'message_start',
      data: {
        type: 'message_start',
        message: { id, type: 'message', role: 'assistant', model: 'replay', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input_tokens, output_tokens: 1 } },
      },
    },
  ]
  content.forEach((block, index) => {
    if (block.type === 'text') {
      events.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } } })
      for (let i = 0; i < block.text.length; i += 8) {
        events.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text.slice(i, i + 8) } } })
      }
    } else if (block.type === 'thinking') {
      events.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } } })
      for (let i = 0; i < block.thinking.length; i += 8) {
        events.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: block.thinking.slice(i, i + 8) } } })
      }
      events.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } } })
    } else if (block.type === 'tool_use' || block.type === 'server_tool_use') {
      events.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: block.type, id: block.id, name: block.name, input: {} } } })
      events.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } } })
    } else {
      // Other blocks (server tool results, ...) arrive whole in their start event.
      events.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: block } })
    }
    events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } })
  })
  events.push({ event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } } })
  events.push({ event: 'message_stop', data: { type: 'message_stop' } })
  return events
}

module.exports = { header, ferroloopBin, startServer, serveScript, anthropicEvents }
