// Compiled by types-budget.test.js (`tsc --strict`): ContextBudget takes either explicit limits
// (`window` and `maxOutputTokens`, both) or a `model`, as the runtime does; the option sets the
// runtime refuses ({}, a window alone, a model beside a limit) are type errors
// (`@ts-expect-error`), where they compiled and threw.
import { ContextBudget } from 'ferroloop'

new ContextBudget({ window: 200_000, maxOutputTokens: 32_000 })
new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, model: null, autocompactBuffer: 10_000 })
new ContextBudget({ model: 'claude-sonnet-4-5' })
new ContextBudget({ model: 'claude-sonnet-4-5', window: null, maxOutputTokens: null, warningBuffer: 5_000 })
declare const window: number
declare const maxOutputTokens: number
new ContextBudget({ window, maxOutputTokens, autocompactPercent: 80 })

// @ts-expect-error neither limits nor a model
new ContextBudget({})
// @ts-expect-error a window without maxOutputTokens
new ContextBudget({ window: 200_000 })
// @ts-expect-error maxOutputTokens without a window
new ContextBudget({ maxOutputTokens: 32_000, blockingBuffer: 1_000 })
// @ts-expect-error a model beside a limit
new ContextBudget({ model: 'claude-sonnet-4-5', window: 1_000_000 })
