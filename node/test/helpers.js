'use strict'
// Shared helpers for the node --test suites: repository paths and chunked feeding.

const fs = require('node:fs')
const path = require('node:path')

const repoRoot = path.resolve(__dirname, '..', '..')
const fixturesDir = path.join(repoRoot, 'tests', 'fixtures')
const sseDataDir = path.join(repoRoot, 'tests', 'sse')

/** Splits `bytes` into chunks of `size` bytes (the whole input when size is Infinity). */
function chunked(bytes, size) {
  if (!Number.isFinite(size) || size >= bytes.length) return [bytes]
  const out = []
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size))
  return out
}

/** Feeds `bytes` to `parser` in chunks of `size`; returns every event in order. */
function feedAll(parser, bytes, size) {
  const events = []
  for (const chunk of chunked(bytes, size)) events.push(...parser.feed(chunk))
  return events
}

/** The Anthropic/OpenAI fixtures with their expected SSE event lists. */
function sseFixtures() {
  const out = []
  for (const provider of fs.readdirSync(fixturesDir).sort()) {
    const dir = path.join(fixturesDir, provider)
    if (!fs.statSync(dir).isDirectory()) continue
    for (const file of fs.readdirSync(dir).sort()) {
      if (!file.endsWith('.sse')) continue
      const name = `${provider}-${file.slice(0, -'.sse'.length)}`
      const expectedPath = path.join(sseDataDir, 'expected', `${name}.jsonl`)
      const expected = fs
        .readFileSync(expectedPath, 'utf8')
        .split('\n')
        .filter((line) => line.length > 0)
        .map((line) => JSON.parse(line))
      out.push({ name, bytes: fs.readFileSync(path.join(dir, file)), expected })
    }
  }
  return out
}

/** The WHATWG conformance vectors (tests/sse/conformance.json) with their input as bytes. */
function conformanceVectors() {
  const vectors = JSON.parse(fs.readFileSync(path.join(sseDataDir, 'conformance.json'), 'utf8'))
  return vectors.map((v) => ({
    name: v.name,
    bytes:
      v.input_base64 !== undefined ? Buffer.from(v.input_base64, 'base64') : Buffer.from(v.input, 'utf8'),
    expected: v.expected,
  }))
}

module.exports = { repoRoot, fixturesDir, chunked, feedAll, sseFixtures, conformanceVectors }
