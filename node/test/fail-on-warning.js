'use strict'
// Preloaded into every test process (`node --test --require`, see package.json): a process
// warning — a listener leak (MaxListenersExceededWarning), a deprecation, an experimental
// feature — fails the file that emitted it, as `filterwarnings = error` does for pytest.
// Loaded as a test file of its own too (everything under test/ is), where it does nothing.

process.on('warning', (warning) => {
  process.exitCode = 1
  process.stderr.write(`a warning fails the test file: ${warning.name}: ${warning.message}\n`)
})
