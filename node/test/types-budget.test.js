'use strict'
// ContextBudget's options are typed as the runtime takes them (types-budget.ts, compiled here
// with `tsc --strict`); the second test checks the runtime refuses what the types refuse.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ContextBudget, InvalidArgumentError } = require('..')

const pkgDir = path.resolve(__dirname, '..')

test('types-budget.ts type-checks under tsc --strict (limits or a model, not neither nor both)', () => {
  const tsc = path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--noEmit', '--strict', '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--types', 'node', path.join(__dirname, 'types-budget.ts')]
  const run = spawnSync(process.execPath, args, { cwd: pkgDir, encoding: 'utf8' })
  assert.equal(run.status, 0, `tsc:\n${run.stdout}${run.stderr}`)
})

test('the runtime refuses the option sets the types refuse, and takes the others', () => {
  for (const options of [{}, { window: 200_000 }, { maxOutputTokens: 32_000, blockingBuffer: 1_000 }, { model: 'claude-sonnet-4-5', window: 1_000_000 }]) {
    assert.throws(() => new ContextBudget(options), InvalidArgumentError, JSON.stringify(options))
  }
  new ContextBudget({ window: 200_000, maxOutputTokens: 32_000, model: null, autocompactBuffer: 10_000 })
  new ContextBudget({ model: 'claude-sonnet-4-5', window: null, maxOutputTokens: null, warningBuffer: 5_000 })
})
