// Token estimates and the context budget with types (checked by `tsc --noEmit`).
import {
  ContextBudget,
  ContextTracker,
  TextEstimator,
  estimateRequest,
  estimateTokens,
  type BudgetState,
  type RequestEstimate,
  type TokenCount,
} from 'ferroloop'

const n: number = estimateTokens('fn main() { println!("hi") }', { tokenizer: 'o200k' })
const request = estimateRequest({ system: 'Be brief.', messages: [{ role: 'user', content: 'hi' }] })
// A Responses body has `instructions` and `input`, no `messages`.
const responses = estimateRequest({ model: 'gpt-5', instructions: 'Be brief.', input: [{ role: 'user', content: 'hi' }] })
const budget = new ContextBudget({ model: 'claude-sonnet-4-20250514' })
const tracker = new ContextTracker({ tokenizer: 'claude' })
tracker.model = 'claude-sonnet-4-20250514'
tracker.pushMessage({ role: 'user', content: 'hello' })
tracker.recordUsage({ input_tokens: 12, output_tokens: 0 })
const count: TokenCount = tracker.tokens()
const tokens: number = count.tokens
const learned: number | null = tracker.correctionFor(tracker.model)
const method: 'exact' | 'usage+estimate' | 'estimate' = count.method
const state: BudgetState = budget.state(tokens)
const parts: RequestEstimate = request
const byPart: number[] = [parts.system, parts.tools, parts.messages, parts.overhead, parts.total]
const log = new TextEstimator({ tokenizer: 'claude' })
log.feed('first line\n')
log.feed(new TextEncoder().encode('second line\n'))
const logTokens: number = log.estimate()
console.log(n, byPart, responses.total, state, method, logTokens, learned)
