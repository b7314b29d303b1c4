// Compiled by types-interfaces.test.js (`tsc --strict`): values typed by the host's own
// interfaces (as @anthropic-ai/sdk's `MessageCreateParams`, `MessageParam` and `Usage`, or
// @types/json-schema's `JSONSchema7`, are) and readonly arrays are accepted wherever the runtime
// takes them. An interface has no index signature, so a parameter typed `Record<string,
// unknown>` refused it ("Index signature for type 'string' is missing"), and a `readonly T[]`
// is not a `T[]`. types-interfaces.test.js runs the same calls to check the runtime takes them.
import { Agent, Client, ContextTracker, ToolExecutor, estimateRequest, estimateTokens } from 'ferroloop'

interface TextBlockParam { type: 'text'; text: string }
interface MessageParam { role: 'user' | 'assistant'; content: string | TextBlockParam[] }
interface MessageCreateParams { model: string; max_tokens: number; messages: MessageParam[]; system?: string }
interface Usage { input_tokens: number; output_tokens: number }
interface JSONSchema { type?: string; properties?: { [key: string]: JSONSchema }; required?: string[] }
interface Weather { city: string; tempC: number }
interface Metadata { user_id: string }

const message: MessageParam = { role: 'user', content: 'Weather in Paris?' }
const messages: readonly MessageParam[] = [message]
const request: MessageCreateParams = { model: 'm', max_tokens: 64, messages: [message] }
const usage: Usage = { input_tokens: 12, output_tokens: 3 }
const schema: JSONSchema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
const extra: { metadata: Metadata } = { metadata: { user_id: 'u' } }

estimateTokens(message)
estimateTokens(request)
estimateTokens(messages)
estimateRequest(request)

const tracker = new ContextTracker()
tracker.setSystem([{ type: 'text', text: 'Be brief.' }] as readonly TextBlockParam[])
tracker.setTools([] as readonly unknown[])
tracker.pushMessage(message)
tracker.replaceMessages(messages)
tracker.recordUsage(usage)

const executor = new ToolExecutor()
  .tool<{ city: string }>({ name: 'weather', schema }, async (input): Promise<Weather> => ({ city: input.city, tempC: 21 }))
  .tool({ name: 'blocks' }, (): readonly TextBlockParam[] => [{ type: 'text', text: 'hi' }])
  .tool({ name: 'wrapped' }, () => ({ content: [{ type: 'text', text: 'hi' }] as readonly TextBlockParam[] }))
const uses: readonly { id: string; name: string; input: unknown }[] = [{ id: 't1', name: 'weather', input: { city: 'Paris' } }]
void executor.run(uses)

const betas: readonly string[] = ['b']
const client = new Client({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9', fromEnv: false, anthropicBeta: betas })
void client.stream(request)
void client.create(request)
const tools: readonly (ToolExecutor | 'read')[] = [executor, 'read']
const agent = new Agent(client, { model: 'm', tools, extra })
void agent.run(null, { messages })
void agent.run([{ type: 'text', text: 'Hi' }] as readonly TextBlockParam[])
