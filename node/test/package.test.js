'use strict'
// What `npm pack` puts in the tarball a user installs (the `files` field of package.json, read by
// npm itself with `npm pack --dry-run --json`, about a second): the licence texts, every file
// package.json points at, the built addon, and no tests, Rust sources or examples. A packaging
// mistake passes every other suite, which loads the package from this directory.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const pkgDir = path.resolve(__dirname, '..')
const repoRoot = path.resolve(pkgDir, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'))

/** The paths `npm pack` would put in the tarball (lifecycle scripts not run). */
function packedFiles() {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts', '--loglevel=error'], {
    cwd: pkgDir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return new Set(JSON.parse(out)[0].files.map((f) => f.path))
}

const files = packedFiles()

test('the tarball carries both licence texts, the same as the repository root', () => {
  for (const name of ['LICENSE-MIT', 'LICENSE-APACHE']) {
    assert.ok(files.has(name), `${name} is not in the tarball`)
    const root = path.join(repoRoot, name)
    // The copies in node/ exist because npm skips symlinks; they must not drift from the root's.
    assert.equal(fs.readFileSync(path.join(pkgDir, name), 'utf8'), fs.readFileSync(root, 'utf8'), `node/${name} differs from ${name}`)
  }
  assert.equal(pkg.license, 'MIT OR Apache-2.0')
})

test('every file package.json points at is in the tarball', () => {
  const targets = [pkg.main, pkg.types]
  const walk = (value) => {
    if (typeof value === 'string') targets.push(value)
    else if (value && typeof value === 'object') Object.values(value).forEach(walk)
  }
  walk(pkg.exports)
  for (const target of targets) {
    const file = path.posix.normalize(target)
    assert.ok(files.has(file), `${target} (named in package.json) is not in the tarball`)
  }
  // lib/index.d.mts re-exports lib/index.d.ts; lib/*.js load ../index.js (the napi loader).
  for (const file of ['README.md', 'package.json', 'index.js', 'index.d.ts', 'lib/index.d.ts']) {
    assert.ok(files.has(file), `${file} is not in the tarball`)
  }
  for (const file of fs.readdirSync(path.join(pkgDir, 'lib'))) {
    assert.ok(files.has(`lib/${file}`), `lib/${file} is not in the tarball`)
  }
})

test('the built addon is in the tarball, and no tests, sources or examples are', () => {
  for (const addon of fs.readdirSync(pkgDir).filter((f) => f.endsWith('.node'))) {
    assert.ok(files.has(addon), `${addon} is not in the tarball`)
  }
  const junk = [...files].filter((f) => /^(test|src|examples|node_modules|target)\//.test(f) || /^(Cargo\.toml|build\.rs|package-lock\.json)$|\.tgz$/.test(f))
  assert.deepEqual(junk, [])
})

/**
 * The relative link targets of a Markdown text, outside code: inline links and images
 * (`[text](target)`), reference definitions (`[label]: target`) and HTML `href` / `src`
 * attributes. Absolute URLs (`https:`, `mailto:`...) and in-page anchors (`#section`) are left out;
 * a target loses its `#fragment` and `?query`.
 */
function relativeLinks(markdown) {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '')
  const targets = []
  for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)/g)) targets.push(match[1])
  for (const match of prose.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/gm)) targets.push(match[1])
  for (const match of prose.matchAll(/\b(?:href|src)\s*=\s*["']([^"']+)["']/gi)) targets.push(match[1])
  return targets
    .filter((target) => !/^([a-z][a-z0-9+.-]*:|\/\/|#)/i.test(target))
    .map((target) => target.replace(/[#?].*$/, ''))
}

test('the README links to no file the tarball lacks (npm shows the README alone)', () => {
  const readme = fs.readFileSync(path.join(pkgDir, 'README.md'), 'utf8')
  const broken = relativeLinks(readme).filter((target) => !files.has(path.posix.normalize(target)))
  assert.deepEqual(broken, [], `README.md links to files outside the package: ${broken.join(', ')}`)
  // The extractor itself: each kind of link is found, code and absolute URLs are not.
  const sample = '[a](../A.md#x) ![b](./lib/b.png "t")\n[c]: ../C.md\n<a href="D.md">d</a>\n' +
    '[e](https://example.invalid/e) [f](#f) `[g](G.md)`\n```\n[h](H.md)\n```\n'
  assert.deepEqual(relativeLinks(sample), ['../A.md', './lib/b.png', '../C.md', 'D.md'])
})

test('the package version is the Cargo workspace version', () => {
  const cargo = fs.readFileSync(path.join(repoRoot, 'Cargo.toml'), 'utf8')
  const version = /\[workspace\.package\][^[]*?\nversion = "([^"]+)"/.exec(cargo)
  assert.ok(version, 'no version in [workspace.package] of Cargo.toml')
  assert.equal(pkg.version, version[1])
})
