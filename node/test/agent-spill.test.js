'use strict'
// An oversized tool result is spilled to a file outside the workspace; the agent's built-in
// `read` may open that file (the preview tells the model where it is), and nothing else outside
// the workspace.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const ferroloop = require('..')
const { serveScript, anthropicEvents } = require('./replay.js')

const { Agent, Client, ToolExecutor } = ferroloop

/** The fingerprint in a spill file's name (the core's `text_fingerprint`), as 16 hex digits. */
function fnv1a64(text) {
  let value = 0xcbf29ce484222325n
  for (const byte of Buffer.from(text)) value = ((value ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn
  return value.toString(16).padStart(16, '0')
}

test('read opens the spill file of an oversized result, but not its neighbours', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferroloop-spill-'))
  try {
    const workspace = path.join(dir, 'ws')
    fs.mkdirSync(workspace)
    const spillDir = path.join(dir, 'spill')
    const bigOutput = Array.from({ length: 500 }, (_, i) => `line ${i} of the big result\n`).join('')
    // `<id>-<FNV-1a 64 of the text>.txt`: the scripted model reads the file the preview names.
    const spillFile = path.join(spillDir, `toolu_1-${fnv1a64(bigOutput)}.txt`)
    const outside = path.join(dir, 'secret.txt')
    fs.writeFileSync(outside, 'not for the model\n')
    const script = {
      responses: [
        { body: { events: anthropicEvents([{ type: 'tool_use', id: 'toolu_1', name: 'big', input: {} }], { stopReason: 'tool_use' }) } },
        {
          body: {
            events: anthropicEvents(
              [
                { type: 'tool_use', id: 'toolu_2', name: 'read', input: { file_path: spillFile, limit: 3 } },
                { type: 'tool_use', id: 'toolu_3', name: 'read', input: { file_path: outside } },
              ],
              { stopReason: 'tool_use' },
            ),
          },
        },
        { body: { events: anthropicEvents([{ type: 'text', text: 'Read it.' }]) } },
      ],
    }
    const server = await serveScript(script, { log: true })
    try {
      const client = new Client({ apiKey: 'test-key', baseUrl: server.url, retryBaseDelayMs: 1 })
      const executor = new ToolExecutor({ defaultMaxResultChars: 200, spillDir }).tool({ name: 'big', concurrencySafe: true }, () => bigOutput)
      const agent = new Agent(client, { model: 'replay', tools: [executor, 'read'], workspace, maxTurns: 5 })
      const events = []
      for await (const event of agent.run('Summarise the big result.')) events.push(event)
      const stop = events.at(-1)
      assert.equal(stop.type, 'stop')
      assert.equal(stop.reason, 'end_turn', stop.error)
      const requests = await server.waitForRequests(3)
      const resultsOf = (request) =>
        JSON.parse(request.body)
          .messages.at(-1)
          .content.filter((b) => b.type === 'tool_result')
      const preview = JSON.stringify(resultsOf(requests[1])[0].content)
      assert.ok(preview.includes(JSON.stringify(spillFile).slice(1, -1)), preview)
      assert.ok(fs.statSync(spillFile).isFile())
      const [spilled, neighbour] = resultsOf(requests[2])
      assert.ok(!spilled.is_error, JSON.stringify(spilled))
      assert.match(JSON.stringify(spilled.content), /line 0 of the big result/)
      assert.doesNotMatch(JSON.stringify(spilled.content), /line 3 of the big result/)
      assert.equal(neighbour.is_error, true)
      assert.doesNotMatch(JSON.stringify(neighbour.content), /not for the model/)
    } finally {
      await server.close()
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
