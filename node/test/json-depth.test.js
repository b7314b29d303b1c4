'use strict'
// JSON nested deeper than the 127 levels the native layer reads (serde_json's limit, every binding's) is refused with a message that
// says so (it said "not valid JSON: recursion limit exceeded", and for an Agent's `extra` "extra
// must be a JSON object", though the value is valid JSON and an object).

const test = require('node:test')
const assert = require('node:assert/strict')
const ferroloop = require('..')

const { Agent, Client, ContextTracker, InvalidArgumentError, estimateRequest, estimateTokens } = ferroloop

/** `n` arrays around a string. */
function deep(n) {
  let value = 'x'
  for (let i = 0; i < n; i++) value = [value]
  return value
}

/** Asserts `fn` throws (or rejects with) an InvalidArgumentError naming the depth limit. */
async function refusedAsTooDeep(fn, what) {
  await assert.rejects(
    async () => fn(),
    (err) => {
      assert.ok(err instanceof InvalidArgumentError, `${what}: ${err}`)
      assert.match(err.message, /nested deeper than 127 levels/, what)
      assert.doesNotMatch(err.message, /not valid JSON|must be a JSON object|recursion limit/, what)
      return true
    },
    what,
  )
}

test('a value nested too deep is refused as such, naming the 127-level limit', async () => {
  const tooDeep = deep(200)
  await refusedAsTooDeep(() => estimateTokens({ role: 'user', content: [{ type: 'text', text: 'hi', meta: tooDeep }] }), 'estimateTokens')
  await refusedAsTooDeep(() => estimateRequest({ messages: [], tools: [{ name: 'x', input_schema: { d: tooDeep } }] }), 'estimateRequest')
  await refusedAsTooDeep(() => new ContextTracker().pushMessage({ role: 'user', content: 'x', meta: tooDeep }), 'pushMessage')
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false, maxRetries: 0 })
  await refusedAsTooDeep(() => client.stream({ model: 'm', metadata: { d: tooDeep } }).message(), 'stream')
  await refusedAsTooDeep(() => client.create({ model: 'm', metadata: { d: tooDeep } }), 'create')
  await refusedAsTooDeep(() => new Agent(client, { model: 'm', extra: { metadata: { d: tooDeep } } }), 'Agent extra')
  // Nested within the limit, the same values are read.
  assert.ok(estimateTokens({ role: 'user', content: [{ type: 'text', text: 'hi', meta: deep(100) }] }) > 0)
  new Agent(client, { model: 'm', extra: { metadata: { d: deep(100) } } })
})

test("a run's conversation nested too deep is refused saying so", async () => {
  const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false, maxRetries: 0 })
  const agent = new Agent(client, { model: 'm' })
  await refusedAsTooDeep(() => agent.run([{ type: 'text', text: 'x', extra: deep(200) }]).result(), 'Agent run')
})

test("a tool's schema or a tool use's input nested too deep is refused saying so", async () => {
  const { ToolExecutor } = ferroloop
  const schema = { type: 'object', properties: { d: { default: deep(200) } } }
  await refusedAsTooDeep(() => new ToolExecutor().tool({ name: 'deep', schema }, () => 'ok').run([]), 'schema')
  // A tool the executor does not know sends its input along through the native layer.
  const turn = new ToolExecutor().tool({ name: 'ok' }, () => 'ok').turn()
  await refusedAsTooDeep(() => {
    turn.submit({ id: 'a', name: 'unknown', input: { d: deep(200) } })
    return turn.results()
  }, 'tool use input')
})
