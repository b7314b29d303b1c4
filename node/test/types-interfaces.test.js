'use strict'
// Values typed by the host's interfaces (an SDK's request, message and usage types, a JSON
// Schema type) and readonly arrays type-check where the runtime takes them: types-interfaces.ts,
// compiled here with `tsc --strict`; the second test makes the same calls at runtime (frozen
// arrays included).

const test = require('node:test')
const assert = require('node:assert/strict')
const { assertTypeChecks } = require('./helpers.js')
const ferroloop = require('..')

test('types-interfaces.ts type-checks under tsc --strict (interface-typed values, readonly arrays)', () => {
  assertTypeChecks('types-interfaces.ts')
})

test('the runtime takes the same values, frozen arrays included', async () => {
  const { Agent, Client, ContextTracker, ToolExecutor, estimateRequest, estimateTokens } = ferroloop
  const message = Object.freeze({ role: 'user', content: 'Weather in Paris?' })
  const messages = Object.freeze([message])
  const request = { model: 'm', max_tokens: 64, messages: [message] }
  assert.ok(estimateTokens(message) > 0)
  assert.equal(estimateTokens(messages), estimateTokens([message]))
  assert.ok(estimateRequest(request).total > 0)
  const tracker = new ContextTracker()
  tracker.setSystem(Object.freeze([{ type: 'text', text: 'Be brief.' }]))
  tracker.setTools(Object.freeze([]))
  tracker.replaceMessages(messages)
  tracker.recordUsage({ input_tokens: 12, output_tokens: 3 })
  assert.deepEqual(tracker.tokens(), { tokens: 15, method: 'exact' })
  const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
  const executor = new ToolExecutor()
    .tool({ name: 'weather', schema }, async (input) => ({ city: input.city, tempC: 21 }))
    .tool({ name: 'blocks' }, () => Object.freeze([{ type: 'text', text: 'hi' }]))
    .tool({ name: 'wrapped' }, () => ({ content: Object.freeze([{ type: 'text', text: 'hi' }]) }))
  const uses = Object.freeze([
    { id: 't1', name: 'weather', input: { city: 'Paris' } },
    { id: 't2', name: 'blocks', input: {} },
    { id: 't3', name: 'wrapped', input: {} },
  ])
  const results = await executor.run(uses)
  assert.deepEqual(results.map((r) => r.content), ['{"city":"Paris","tempC":21}', [{ type: 'text', text: 'hi' }], [{ type: 'text', text: 'hi' }]])
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false, anthropicBeta: Object.freeze(['b']) })
  const agent = new Agent(client, { model: 'm', tools: Object.freeze([executor, 'read']), extra: { metadata: { user_id: 'u' } } })
  assert.deepEqual(agent.toolNames, ['blocks', 'read', 'weather', 'wrapped'])
  const run = agent.run(null, { messages })
  run.abort()
  assert.equal((await run.result()).reason, 'aborted')
})
