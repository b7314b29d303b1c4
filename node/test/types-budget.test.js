'use strict'
// ContextBudget's options are typed as the runtime takes them (types-budget.ts, compiled here
// with `tsc --strict`); the second test checks the runtime refuses what the types refuse.

const test = require('node:test')
const assert = require('node:assert/strict')
const { assertTypeChecks } = require('./helpers.js')
const { ContextBudget, InvalidArgumentError } = require('..')

test('types-budget.ts type-checks under tsc --strict (limits or a model, not neither nor both)', () => {
  assertTypeChecks('types-budget.ts')
})

test('the runtime refuses the option sets the types refuse, and takes the others', () => {
  for (const options of [{}, { window: 200_000 }, { maxOutputTokens: 32_000, blockingBuffer: 1_000 }, { model: 'claude-sonnet-4-5', window: 1_000_000 }]) {
    assert.throws(() => new ContextBudget(options), InvalidArgumentError, JSON.stringify(options))
  }
  new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, model: null, autocompactBuffer: 10_000 })
  new ContextBudget({ model: 'claude-sonnet-4-5', window: null, maxOutputTokens: null, warningBuffer: 5_000 })
})
