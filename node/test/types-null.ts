// Compiled by types-null.test.js (`tsc --strict`): every option the runtime reads as absent
// when it is null is declared `?: T | null` (the docs say "`null` counts as absent"), and the
// options objects the runtime refuses as null stay refused (the `@ts-expect-error` lines).
// types-null.test.js runs the same calls to check the runtime takes them.
import {
  Agent,
  Client,
  ContextBudget,
  ContextTracker,
  FerroloopError,
  InvalidArgumentError,
  SseParser,
  StreamDecoder,
  TextEstimator,
  ToolExecutor,
  estimateRequest,
  estimateTokens,
} from 'ferroloop'

const client = new Client({
  provider: null,
  apiKey: 'k',
  baseUrl: 'http://127.0.0.1:9',
  maxRetries: null,
  retryBaseDelayMs: null,
  retryMaxDelayMs: null,
  timeouts: { connectMs: null, firstByteMs: null, firstEventMs: null, idleMs: null, stallNoticeMs: null, totalMs: null },
  headers: null,
  anthropicVersion: null,
  anthropicBeta: null,
  fromEnv: null,
})
new Client({ timeouts: null })
client.stream({}, { signal: null }).abort()
void client.create({}, { signal: null }).catch(() => undefined)

const executor = new ToolExecutor({
  maxConcurrency: null,
  defaultTimeoutMs: null,
  cleanupGraceMs: null,
  defaultMaxResultChars: null,
  turnBudgetChars: null,
  spillDir: null,
})
executor.tool(
  { name: 'a', description: null, concurrencySafe: null, timeoutMs: null, maxResultChars: null, schema: null, cancelsSiblingsOnError: null },
  () => 'x',
)
void executor.run([], { signal: null })

new StreamDecoder({ provider: null, events: null })
new SseParser({ maxEventBytes: null })

estimateTokens('x', { tokenizer: null })
estimateTokens('x', null)
estimateRequest({ messages: [] }, { tokenizer: null })
estimateRequest({ messages: [] }, null)
new ContextTracker({ tokenizer: null })
new ContextTracker(null)
new TextEstimator({ tokenizer: null })
new TextEstimator(null)
const tracker = new ContextTracker()
tracker.pushMessage({ role: 'user', content: 'hi' })
tracker.recordUsage({ input_tokens: 1 }, null)

new ContextBudget({
  model: 'x',
  window: null,
  maxOutputTokens: null,
  outputReserveCap: null,
  autocompactBuffer: null,
  warningBuffer: null,
  blockingBuffer: null,
  autocompactPercent: null,
})

const agent = new Agent(client, {
  model: 'm',
  system: null,
  tools: null,
  workspace: null,
  maxTurns: null,
  maxTokens: null,
  tokenBudget: null,
  maxContinuations: null,
  escalatedMaxTokens: null,
  keepRecentToolResults: null,
  fallbackModel: null,
  fallbackAfter529Retries: null,
  promptCaching: null,
  tokenizer: null,
  extra: null,
})
agent.run('x', { signal: null, messages: null }).abort()

new FerroloopError('x', { code: null, status: null, requestId: null })
// A subclass's code is its own, whatever the option says.
const code: 'invalid_argument' = new InvalidArgumentError('x', { code: 'timeout' }).code
void code

// The runtime refuses these: the types must too.
// @ts-expect-error a null Client options object is refused
new Client(null)
// @ts-expect-error a null ToolExecutor options object is refused
new ToolExecutor(null)
// @ts-expect-error a null StreamDecoder options object is refused
new StreamDecoder(null)
// @ts-expect-error a null SseParser options object is refused
new SseParser(null)
// @ts-expect-error a null ContextBudget options object is refused
new ContextBudget(null)
// @ts-expect-error a null run options object is refused
void executor.run([], null)
// @ts-expect-error a null request options object is refused
client.stream({}, null)
// @ts-expect-error a null Agent run options object is refused
agent.run('x', null)
// @ts-expect-error the model is required
new Agent(client, { model: null })
