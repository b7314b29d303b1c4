'use strict'
// Shared helpers for the node --test suites: repository paths, chunked feeding, and the types
// declared in lib/index.d.ts (to check the values the API produces against them).

const assert = require('node:assert/strict')
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

// ---------------------------------------------------------------------------------------------
// The declared types of lib/index.d.ts (hand-written: nothing but these tests keeps them true).
//
// A small reader of the subset of TypeScript the file uses for data: type aliases
// (`export type X = ...`, unions spread over lines with doc comments between the members) and
// interfaces (`export interface X { field: T; other?: U }`); type expressions made of unions,
// intersections (`string & {}`), string literals, `string`/`number`/`boolean`/`null`/
// `unknown`/`any`, `T[]`, `Array<T>`, `Record<string, T>`, object literals (`{ a: T; b?: U;
// [key: string]: V }`) and the names of other declared types.

/** Removes `/* ... *\/` and `// ...` comments (none of the declarations has `//` in a string). */
function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"])\/\/.*$/gm, '$1')
}

/**
 * Splits `text` at the top-level (outside brackets and quotes) occurrences of `sep` (a
 * character); with `newlines`, a newline also ends a part unless the next line continues the
 * expression (starts with `|` or `&`). Empty parts are dropped.
 */
function splitTopLevel(text, sep, { newlines = false } = {}) {
  const parts = []
  let depth = 0
  let quote = null
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quote !== null) {
      if (c === '\\') i++
      else if (c === quote) quote = null
    } else if (c === "'" || c === '"' || c === '`') quote = c
    else if ('{[(<'.includes(c)) depth++
    else if ('}])>'.includes(c) && !(c === '>' && text[i - 1] === '=')) depth--
    else if (depth === 0 && (c === sep || (newlines && c === '\n' && !/^\s*[|&]/.test(text.slice(i + 1))))) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts.map((p) => p.trim()).filter((p) => p.length > 0)
}

/** The index just past the bracket closing the one at `open`. */
function closingBracket(text, open) {
  let depth = 0
  let quote = null
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (quote !== null) {
      if (c === '\\') i++
      else if (c === quote) quote = null
    } else if (c === "'" || c === '"' || c === '`') quote = c
    else if ('{[(<'.includes(c)) depth++
    else if ('}])>'.includes(c) && !(c === '>' && text[i - 1] === '=')) {
      if (--depth === 0) return i + 1
    }
  }
  throw new Error(`unbalanced bracket at ${open}`)
}

/**
 * The fields of an object type's body (`a: T; readonly b?: U` or one per line): name →
 * { type, optional }; an index signature `[key: string]: T` is the field `[index]`. Methods
 * and call or construct signatures are left out (the tests check data).
 */
function parseFields(body) {
  const fields = {}
  for (const member of splitTopLevel(body, ';', { newlines: true })) {
    const index = /^\[\w+: string\]: ([\s\S]+)$/.exec(member)
    if (index) {
      fields['[index]'] = { type: index[1].trim(), optional: true }
      continue
    }
    const field = /^(?:readonly\s+)?([A-Za-z_$][\w$]*)(\??):\s*([\s\S]+)$/.exec(member)
    if (field) fields[field[1]] = { type: field[3].trim(), optional: field[2] === '?' }
  }
  return fields
}

let declaredCache = null

/**
 * The declarations of lib/index.d.ts: `{ aliases: Map<name, type text>, interfaces: Map<name,
 * fields> }` (fields as {@link parseFields} gives them).
 */
function declaredTypes() {
  if (declaredCache !== null) return declaredCache
  const dts = stripComments(fs.readFileSync(path.join(__dirname, '..', 'lib', 'index.d.ts'), 'utf8'))
  const aliases = new Map()
  const interfaces = new Map()
  for (const match of dts.matchAll(/^export type (\w+)(?:<[^=]*>)? =/gm)) {
    const rest = dts.slice(match.index + match[0].length)
    aliases.set(match[1], splitTopLevel(rest, ';', { newlines: true })[0])
  }
  for (const match of dts.matchAll(/^export interface (\w+)(?:<[^{]*>)?(?: extends [^{]+)? \{/gm)) {
    const open = match.index + match[0].length - 1
    interfaces.set(match[1], parseFields(dts.slice(open + 1, closingBracket(dts, open) - 1)))
  }
  declaredCache = { aliases, interfaces }
  return declaredCache
}

/**
 * The declared type of `member` of class `owner` (a method's return type, `Promise<T>` as `T`; a
 * property's type), or of the exported function `member` when `owner` is null.
 */
function declaredMemberType(owner, member) {
  const dts = stripComments(fs.readFileSync(path.join(__dirname, '..', 'lib', 'index.d.ts'), 'utf8'))
  let scope = dts
  if (owner !== null) {
    const start = new RegExp(`^export declare class ${owner}\\b[^{]*\\{`, 'm').exec(dts)
    assert.ok(start, `class ${owner} in index.d.ts`)
    const open = start.index + start[0].length - 1
    scope = dts.slice(open + 1, closingBracket(dts, open) - 1)
  }
  const head = new RegExp(owner === null ? `^export declare function ${member}\\(` : `^\\s*(?:readonly\\s+)?${member}(\\(|\\??:)`, 'm').exec(scope)
  assert.ok(head, `${owner ?? 'function'} ${member} in index.d.ts`)
  let rest = scope.slice(head.index + head[0].length - 1)
  if (rest.startsWith('(')) rest = rest.slice(closingBracket(rest, 0)).replace(/^\s*:/, '')
  else rest = rest.replace(/^\??:/, '')
  const type = splitTopLevel(rest, ';', { newlines: true })[0]
  const promise = /^Promise<([\s\S]+)>$/.exec(type)
  return promise ? promise[1] : type
}

/** `text` without parentheses wrapping all of it. */
function unwrap(text) {
  text = text.trim()
  while (text.startsWith('(') && closingBracket(text, 0) === text.length) text = text.slice(1, -1).trim()
  return text
}

/**
 * The object shapes a type stands for, its unions and the names of declared aliases and
 * interfaces expanded: [{ label, fields }] (`label` names the member: its literal fields,
 * `type` first, as `context action=compaction`). Types that are no object shape are left out.
 */
function objectMembers(typeText) {
  const { aliases, interfaces } = declaredTypes()
  const out = []
  for (const alternative of splitTopLevel(unwrap(typeText), '|')) {
    const t = unwrap(alternative)
    if (t.startsWith('{')) out.push(shapeOf(parseFields(t.slice(1, -1))))
    else if (interfaces.has(t)) out.push(shapeOf(interfaces.get(t)))
    else if (aliases.has(t)) out.push(...objectMembers(aliases.get(t)))
  }
  return out
}

/** A member shape with its label (see {@link objectMembers}). */
function shapeOf(fields) {
  const literals = Object.entries(fields).filter(([, f]) => /^'[^']*'$/.test(f.type))
  literals.sort(([a], [b]) => (a === 'type' ? -1 : b === 'type' ? 1 : 0))
  const label = literals.map(([name, f]) => (name === 'type' ? f.type.slice(1, -1) : `${name}=${f.type.slice(1, -1)}`)).join(' ')
  return { label, fields }
}

/** The labels of the object members of declared type `name` (for coverage checks). */
function memberLabels(name) {
  return objectMembers(name).map((m) => m.label)
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * Why `value` is not of the type `typeText` (a declared type's name or a type expression), or
 * null when it is. Object shapes are exact: every required field present, no field the type
 * does not declare (unless it has an index signature).
 */
function typeMismatch(value, typeText, where, { open = false } = {}) {
  const options = { open }
  const { aliases, interfaces } = declaredTypes()
  const t = unwrap(typeText)
  const alternatives = splitTopLevel(t, '|')
  if (alternatives.length > 1) {
    // An object value is checked against the object members its literal fields select (the
    // discriminants: `type`, and `action` for the two `context` events); other values against
    // each alternative.
    if (isPlainObject(value)) {
      const members = objectMembers(t)
      const selected = members.filter(({ fields }) =>
        Object.entries(fields).every(([name, f]) => !/^'[^']*'$/.test(f.type) || value[name] === f.type.slice(1, -1)),
      )
      if (selected.length > 0) {
        const errors = selected.map((m) => fieldsMismatch(value, m.fields, `${where} (${m.label})`, options))
        return errors.includes(null) ? null : errors.join('; ')
      }
      if (members.length === alternatives.length && members.every((m) => m.fields.type !== undefined)) {
        return `${where}: ${JSON.stringify(value.type)} (fields ${JSON.stringify(Object.keys(value))}) is no member of ${members.map((m) => m.label).join(', ')}`
      }
    }
    const errors = []
    for (const alternative of alternatives) {
      const error = typeMismatch(value, alternative, where, options)
      if (error === null) return null
      errors.push(error)
    }
    return `${where}: ${JSON.stringify(value)} is none of ${t.replace(/\s+/g, ' ')}`
  }
  // `string & {}`: a string a later version may send, besides the listed literals. The values of
  // this version must be listed, unless `open`.
  if (/^string\s*&\s*\{\s*\}$/.test(t) && !open) return `${where}: ${JSON.stringify(value)} is not one of the values listed`
  const intersection = splitTopLevel(t, '&')
  if (intersection.length > 1) {
    for (const part of intersection) {
      const error = typeMismatch(value, part, where, options)
      if (error !== null) return error
    }
    return null
  }
  const expect = (ok) => (ok ? null : `${where}: ${JSON.stringify(value)} is not ${t}`)
  if (/^'[^']*'$/.test(t)) return expect(value === t.slice(1, -1))
  switch (t) {
    case 'string':
    case 'number':
    case 'boolean':
      return expect(typeof value === t)
    case 'null':
      return expect(value === null)
    case 'undefined':
      return expect(value === undefined)
    case 'unknown':
    case 'any':
      return expect(value !== undefined)
    case '{}':
      return expect(value !== null && value !== undefined)
  }
  const array = /^(?:([\s\S]+)\[\]|Array<([\s\S]+)>)$/.exec(t)
  if (array) {
    if (!Array.isArray(value)) return expect(false)
    for (const [i, item] of value.entries()) {
      const error = typeMismatch(item, array[1] ?? array[2], `${where}[${i}]`, options)
      if (error !== null) return error
    }
    return null
  }
  const record = /^Record<string, ([\s\S]+)>$/.exec(t)
  if (record) {
    if (!isPlainObject(value)) return expect(false)
    for (const [key, item] of Object.entries(value)) {
      const error = typeMismatch(item, record[1], `${where}.${key}`, options)
      if (error !== null) return error
    }
    return null
  }
  if (t.startsWith('{')) return fieldsMismatch(value, parseFields(t.slice(1, -1)), where, options)
  if (interfaces.has(t)) return fieldsMismatch(value, interfaces.get(t), `${where} (${t})`, options)
  if (aliases.has(t)) return typeMismatch(value, aliases.get(t), where, options)
  throw new Error(`${where}: the type checker does not know ${t}`)
}

/** Why object `value` does not have exactly `fields` (see {@link typeMismatch}), or null. */
function fieldsMismatch(value, fields, where, options = {}) {
  if (!isPlainObject(value)) return `${where}: ${JSON.stringify(value)} is not an object`
  const index = fields['[index]']
  const declared = Object.keys(fields).filter((name) => name !== '[index]')
  const missing = declared.filter((name) => !fields[name].optional && !(name in value))
  const extra = Object.keys(value).filter((name) => !(name in fields) && index === undefined)
  if (missing.length > 0 || extra.length > 0) {
    return `${where}: fields ${JSON.stringify(Object.keys(value).sort())}, declared ${JSON.stringify(declared.sort())}`
  }
  for (const [name, item] of Object.entries(value)) {
    const field = fields[name] ?? index
    if (field.optional && item === undefined) continue
    const error = typeMismatch(item, field.type, `${where}.${name}`, options)
    if (error !== null) return error
  }
  return null
}

/**
 * Asserts that `value` is of the declared type `typeText` (see {@link typeMismatch}); returns
 * the label of the object member it matched (see {@link objectMembers}), or null for a value
 * that is no object member. A string typed `Listed | (string & {})` must be one of the listed
 * values (the rest is room for later versions), unless `open`.
 */
function assertDeclared(value, typeText, where = typeText, { open = false } = {}) {
  const error = typeMismatch(value, typeText, where, { open })
  if (error !== null) throw new assert.AssertionError({ message: error, actual: value, operator: 'assertDeclared' })
  if (!isPlainObject(value)) return null
  const members = objectMembers(typeText).filter((m) => fieldsMismatch(value, m.fields, where, { open }) === null)
  return members.length > 0 ? members[0].label : null
}

/**
 * Checks that `feed` (a fresh parser's or decoder's, from `make()`) refuses a detached
 * ArrayBuffer and every kind of view of one with the InvalidArgumentError naming `what`, and
 * still reads an empty chunk that is not detached as no events.
 */
function assertDetachedChunksRefused(make, what) {
  const { InvalidArgumentError, FerroloopError } = require('../lib/index.js')
  const buffer = new ArrayBuffer(8)
  const views = {
    Uint8Array: new Uint8Array(buffer),
    Buffer: Buffer.from(buffer),
    DataView: new DataView(buffer),
    Int16Array: new Int16Array(buffer),
  }
  structuredClone(buffer, { transfer: [buffer] })
  const refused = (subject) => (err) =>
    err instanceof InvalidArgumentError && err instanceof FerroloopError && err.code === 'invalid_argument' &&
    err.message === `${what}: ${subject} is detached (transferred, or a closed stream's): it has no bytes to read`
  assert.throws(() => make().feed(buffer), refused('the ArrayBuffer'))
  for (const [kind, view] of Object.entries(views)) {
    assert.throws(() => make().feed(view), refused("the view's ArrayBuffer"), kind)
  }
  for (const empty of [new ArrayBuffer(0), new Uint8Array(0), new DataView(new ArrayBuffer(0))]) {
    assert.deepEqual(make().feed(empty), [])
  }
}

/**
 * Asserts that `file` (a TypeScript file beside the tests) type-checks against the package's
 * declarations under `tsc --noEmit --strict`, as an ES2022 NodeNext module.
 */
function assertTypeChecks(file) {
  const pkgDir = path.resolve(__dirname, '..')
  const tsc = path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--noEmit', '--strict', '--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--types', 'node', path.join(__dirname, file)]
  const run = require('node:child_process').spawnSync(process.execPath, args, { cwd: pkgDir, encoding: 'utf8' })
  assert.equal(run.status, 0, `tsc ${file}:\n${run.stdout}${run.stderr}`)
}

/**
 * `promise`, or a rejection naming `what` when it is still pending after `ms`: a bound on a
 * hang (a promise that never settles), not a timing assertion.
 */
async function settlesWithin(promise, what, ms = 5000) {
  let timer
  const hang = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, hang])
  } finally {
    clearTimeout(timer)
  }
}

module.exports = {
  assertDetachedChunksRefused,
  settlesWithin,
  assertTypeChecks,
  repoRoot,
  fixturesDir,
  chunked,
  feedAll,
  sseFixtures,
  conformanceVectors,
  declaredTypes,
  declaredMemberType,
  memberLabels,
  typeMismatch,
  assertDeclared,
}
