'use strict'
// The TypeScript examples (examples/*.ts: the typed agent loop, tools, decoding, SSE, tokens)
// type-check against the package's declarations under `tsc --noEmit --strict`
// (examples/tsconfig.json), so `npm test` alone catches an example or a declaration drifting,
// as scripts/test-node.sh's `npm run typecheck` does.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const pkgDir = path.resolve(__dirname, '..')

test('the TypeScript examples type-check: tsc --noEmit -p examples/tsconfig.json', () => {
  const tsc = path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc')
  const run = spawnSync(process.execPath, [tsc, '--noEmit', '-p', path.join(pkgDir, 'examples', 'tsconfig.json')], {
    cwd: pkgDir,
    encoding: 'utf8',
  })
  assert.equal(run.status, 0, `tsc:\n${run.stdout}${run.stderr}`)
})
