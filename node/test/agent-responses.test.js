'use strict'
// The agent over the OpenAI Responses API: `serve-replay --agent-model --agent-model-provider
// openai-responses` streams the scripted conversation of `ferroloop run` as `response.*` events;
// the core translates the requests (the whole history as input items, nothing stored) and the
// events. The built-in tools run for real.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const ferroloop = require('..')
const { repoRoot } = require('./helpers.js')
const { startServer } = require('./replay.js')

const { Agent, Client } = ferroloop
const workspace = path.join(repoRoot, 'node', 'lib')

test('the agent runs the replay conversation over the Responses API', async () => {
  const server = await startServer(['--agent-model', '--agent-model-provider', 'openai-responses'], { log: true })
  try {
    const client = new Client({ provider: 'openai-responses', apiKey: 'sk-test', baseUrl: server.url, retryBaseDelayMs: 1 })
    const agent = new Agent(client, { model: 'gpt-5', tools: ['read', 'glob', 'grep'], workspace })
    const events = []
    for await (const event of agent.run('Explore this directory.')) events.push(event)
    const stop = events.at(-1)
    assert.equal(stop.type, 'stop')
    assert.equal(stop.reason, 'end_turn', stop.error)
    assert.equal(stop.turns, 3)
    assert.equal(stop.toolCalls, 5)
    assert.ok(events.some((e) => e.type === 'text_delta'))
    assert.match(JSON.stringify(stop.messages.at(-1).content), /Here is what I found/)
    const requests = await server.waitForRequests(3)
    assert.equal(requests.length, 3)
    assert.ok(requests.every((r) => r.path.endsWith('/responses')))
    const last = JSON.parse(requests[2].body)
    assert.equal(last.store, false)
    assert.deepEqual(last.include, ['reasoning.encrypted_content'])
    assert.equal(last.input.filter((item) => item.type === 'function_call_output').length, 5)
  } finally {
    await server.close()
  }
})
