'use strict'
// examples/decode.ts reads a recorded stream from the repository's fixtures. Run (transpiled as
// tsc emits it for this package: CommonJS) from a directory other than node/, it must still
// find it: it read a path relative to the working directory, so it worked from node/ only.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const ts = require('typescript')

const examples = path.resolve(__dirname, '..', 'examples')

test('examples/decode.ts finds its fixture whatever the working directory', (t) => {
  const source = fs.readFileSync(path.join(examples, 'decode.ts'), 'utf8')
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  })
  // Beside the example, so that its relative paths and `ferroloop` resolve as the example's.
  const script = path.join(examples, `.decode-run-${process.pid}.cjs`)
  fs.writeFileSync(script, outputText)
  t.after(() => fs.rmSync(script, { force: true }))
  const run = spawnSync(process.execPath, [script], { cwd: os.tmpdir(), encoding: 'utf8' })
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`)
  assert.match(run.stdout, /^message msg_/m)
})
