'use strict'
// Every public declaration of the package's types (lib/index.d.ts, what `require('ferroloop')`
// and, through lib/index.d.mts, `import` expose) carries a JSDoc comment: each exported class,
// interface, type alias and function; each member of an exported class or interface (method,
// property, getter, constructor with parameters); each member of an options or event type
// written inline (a property of an object type in a type alias, and each object type of a union
// of them, such as AgentEvent's). Parsed with the TypeScript compiler API (the dev dependency),
// so the addon need not be built.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const ts = require('typescript')

const declFile = path.resolve(__dirname, '..', 'lib', 'index.d.ts')

/**
 * The text of the JSDoc comments (`/** ... *\/`) just before `node`, or '' when it has none.
 * `from` is where to look from: the node's own start by default; for a member of a union, the
 * end of the member before it (the comment stands before the `|`).
 */
function jsDocText(node, sourceText, from = node.pos) {
  const ranges = [...(ts.getLeadingCommentRanges(sourceText, from) || []), ...(from === node.pos ? [] : ts.getLeadingCommentRanges(sourceText, node.pos) || [])]
  return ranges
    .filter((r) => r.kind === ts.SyntaxKind.MultiLineCommentTrivia && sourceText.startsWith('/**', r.pos))
    .map((r) => sourceText.slice(r.pos + 3, r.end - 2).replace(/^\s*\*/gm, '').trim())
    .join('\n')
    .trim()
}

function isExported(node) {
  return (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export) !== 0
}

function isPrivate(node) {
  return (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Private) !== 0
}

function memberName(member, sourceFile) {
  if (ts.isConstructorDeclaration(member)) return 'constructor'
  if (ts.isCallSignatureDeclaration(member)) return '(call)'
  if (ts.isIndexSignatureDeclaration(member)) return '[index]'
  return member.name ? member.name.getText(sourceFile) : '(anonymous)'
}

/**
 * The documentable items of `file`: `{ label, doc }` for every exported declaration, every
 * member of an exported class or interface, every property of an object type in an exported
 * type alias, and every object type of a union in one.
 */
function publicItems(file) {
  const sourceText = fs.readFileSync(file, 'utf8')
  const sourceFile = ts.createSourceFile(file, sourceText, ts.ScriptTarget.Latest, true)
  const items = []
  const add = (label, node, from) => items.push({ label, doc: jsDocText(node, sourceText, from), line: sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile)).line + 1 })

  const addMembers = (owner, members) => {
    for (const member of members) {
      if (isPrivate(member) || ts.isIndexSignatureDeclaration(member)) continue
      // A constructor without parameters says nothing the class's comment does not.
      if (ts.isConstructorDeclaration(member) && member.parameters.length === 0) continue
      add(`${owner}.${memberName(member, sourceFile)}`, member)
    }
  }

  const addTypeNode = (owner, typeNode) => {
    if (ts.isParenthesizedTypeNode(typeNode)) return addTypeNode(owner, typeNode.type)
    if (ts.isTypeLiteralNode(typeNode)) return addMembers(owner, typeNode.members)
    if (ts.isUnionTypeNode(typeNode) || ts.isIntersectionTypeNode(typeNode)) {
      const literals = typeNode.types.filter(ts.isTypeLiteralNode)
      for (const literal of literals) {
        const discriminant = literal.members.find((m) => m.name && m.name.getText(sourceFile) === 'type' && m.type && ts.isLiteralTypeNode(m.type))
        const tag = discriminant ? discriminant.type.getText(sourceFile) : `#${typeNode.types.indexOf(literal)}`
        // Each object type of a union (an event kind) is documented as a whole.
        const i = typeNode.types.indexOf(literal)
        const from = i === 0 ? typeNode.pos : typeNode.types[i - 1].end
        if (ts.isUnionTypeNode(typeNode) && literals.length > 1) add(`${owner}<${tag}>`, literal, from)
      }
    }
  }

  for (const statement of sourceFile.statements) {
    if (!isExported(statement)) continue
    if (ts.isClassDeclaration(statement) || ts.isInterfaceDeclaration(statement)) {
      const name = statement.name.text
      add(name, statement)
      addMembers(name, statement.members)
    } else if (ts.isTypeAliasDeclaration(statement)) {
      add(statement.name.text, statement)
      addTypeNode(statement.name.text, statement.type)
    } else if (ts.isFunctionDeclaration(statement) || ts.isEnumDeclaration(statement)) {
      add(statement.name.text, statement)
    } else if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations) add(d.name.getText(sourceFile), statement)
    }
  }
  return items
}

test('every public declaration of lib/index.d.ts has a JSDoc comment', () => {
  const items = publicItems(declFile)
  assert.ok(items.length > 200, `only ${items.length} declarations found: is the parser still reading lib/index.d.ts?`)
  const missing = items.filter((item) => item.doc === '').map((item) => `lib/index.d.ts:${item.line} ${item.label}`)
  assert.deepEqual(missing, [], `${missing.length} of ${items.length} public declarations have no JSDoc`)
})

test('lib/index.d.mts re-exports lib/index.d.ts (so import sees the same documented declarations)', () => {
  const mts = fs.readFileSync(path.resolve(__dirname, '..', 'lib', 'index.d.mts'), 'utf8')
  assert.match(mts, /export \* from '\.\/index\.js'/)
})

module.exports = { publicItems }

if (require.main === module && process.argv.includes('--list')) {
  const items = publicItems(declFile)
  for (const item of items) if (item.doc === '') console.log(`lib/index.d.ts:${item.line} ${item.label}`)
  console.log(`${items.filter((i) => i.doc === '').length} undocumented of ${items.length}`)
}
