'use strict'
// The option types take `null` wherever the runtime reads it as absent (the docs' "`null` counts
// as absent"): types-null.ts, compiled here with `tsc --strict`, makes those calls (and checks
// the null options objects the runtime refuses stay type errors); the second test makes the
// same calls at runtime.

const test = require('node:test')
const assert = require('node:assert/strict')
const { assertTypeChecks } = require('./helpers.js')
const ferroloop = require('..')

test('types-null.ts type-checks under tsc --strict (null options are declared)', () => {
  assertTypeChecks('types-null.ts')
})

test('the runtime takes the same nulls as absent', async () => {
  const { Agent, Client, ContextBudget, ContextTracker, SseParser, StreamDecoder, TextEstimator, ToolExecutor } = ferroloop
  const client = new Client({
    provider: null, apiKey: 'k', baseUrl: 'http://127.0.0.1:9', maxRetries: null, retryBaseDelayMs: null, retryMaxDelayMs: null,
    timeouts: { connectMs: null, firstByteMs: null, firstEventMs: null, idleMs: null, stallNoticeMs: null, totalMs: null },
    headers: null, anthropicVersion: null, anthropicBeta: null, fromEnv: null,
  })
  new Client({ timeouts: null })
  const aborted = AbortSignal.abort()
  await assert.rejects(client.stream({}, { signal: aborted }).message(), { code: 'aborted' })
  const stream = client.stream({}, { signal: null })
  stream.abort()
  await assert.rejects(stream.message(), { code: 'aborted' })
  const executor = new ToolExecutor({ maxConcurrency: null, defaultTimeoutMs: null, cleanupGraceMs: null, defaultMaxResultChars: null, turnBudgetChars: null, spillDir: null })
  executor.tool({ name: 'a', description: null, concurrencySafe: null, timeoutMs: null, maxResultChars: null, schema: null, cancelsSiblingsOnError: null }, () => 'x')
  assert.deepEqual(await executor.run([{ id: 't', name: 'a' }], { signal: null }), [{ type: 'tool_result', tool_use_id: 't', content: 'x', is_error: false }])
  assert.equal(new StreamDecoder({ provider: null, events: null }).provider, 'anthropic')
  new SseParser({ maxEventBytes: null })
  const expected = ferroloop.estimateTokens('some text')
  assert.equal(ferroloop.estimateTokens('some text', { tokenizer: null }), expected)
  assert.equal(ferroloop.estimateTokens('some text', null), expected)
  assert.equal(ferroloop.estimateRequest({ messages: [] }, { tokenizer: null }).total, ferroloop.estimateRequest({ messages: [] }).total)
  assert.equal(ferroloop.estimateRequest({ messages: [] }, null).total, ferroloop.estimateRequest({ messages: [] }).total)
  assert.equal(new ContextTracker({ tokenizer: null }).tokenizer, 'claude')
  assert.equal(new ContextTracker(null).tokenizer, 'claude')
  new TextEstimator({ tokenizer: null })
  new TextEstimator(null)
  const tracker = new ContextTracker()
  tracker.pushMessage({ role: 'user', content: 'hi' })
  tracker.recordUsage({ input_tokens: 7 }, null)
  assert.deepEqual(tracker.tokens(), { tokens: 7, method: 'exact' })
  const budget = new ContextBudget({ model: 'x', window: null, maxOutputTokens: null, outputReserveCap: null, autocompactBuffer: null, warningBuffer: null, blockingBuffer: null, autocompactPercent: null })
  assert.equal(budget.window, new ContextBudget({ model: 'x' }).window)
  const agent = new Agent(client, {
    model: 'm', system: null, tools: null, workspace: null, maxTurns: null, maxTokens: null, tokenBudget: null, maxContinuations: null,
    escalatedMaxTokens: null, keepRecentToolResults: null, fallbackModel: null, fallbackAfter529Retries: null, promptCaching: null, tokenizer: null, extra: null,
  })
  const run = agent.run('x', { signal: null, messages: null })
  run.abort()
  assert.equal((await run.result()).reason, 'aborted')
  const error = new ferroloop.FerroloopError('x', { code: null, status: null, requestId: null })
  assert.deepEqual([error.code, error.status, error.requestId], ['internal', null, null])
})
