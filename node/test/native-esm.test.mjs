// `ferroloop/native` (the raw addon) loads from ESM as from CommonJS: its d.ts types the ESM
// import, and Node refused it (ERR_PACKAGE_PATH_NOT_EXPORTED) while the export map had only a
// `require` condition. The package imports itself by name (Node's self-reference).
import test from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

test('ferroloop/native imports from ESM: the same addon as require() gives', async () => {
  const esm = await import('ferroloop/native')
  const cjs = require('ferroloop/native')
  assert.equal(typeof cjs.SseParser, 'function')
  assert.equal(esm.default, cjs)
  assert.equal(esm.SseParser, cjs.SseParser)
  assert.equal(esm.estimateText, cjs.estimateText)
})
