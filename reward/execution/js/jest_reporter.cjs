'use strict';
// jest's reporter (`--reporters`): each file's tests as jest finishes the file.
const emit = require('./swe_rl_emit.cjs');

const OUTCOMES = { passed: 'passed', failed: 'failed' }; // pending, todo, skipped, disabled: skipped

class SweRlReporter {
  constructor() {
    this.failed = 0;
  }

  onTestResult(test, result) {
    const tests = result.testResults || [];
    if (result.testExecError && tests.length === 0) {
      this.failed += 1;
      emit.collect(result.testFilePath, result.testExecError);
    }
    for (const t of tests) {
      const outcome = OUTCOMES[t.status] || 'skipped';
      if (outcome === 'failed') this.failed += 1;
      emit.test(result.testFilePath, [...(t.ancestorTitles || []), t.title], 'call', outcome, (t.failureMessages || []).join('\n'));
    }
  }

  onRunComplete(contexts, results) {
    const broken = results && (results.numRuntimeErrorTestSuites || results.numFailedTestSuites);
    emit.exit(this.failed || broken ? 1 : 0);
  }

  getLastError() {
    return undefined;
  }
}

Object.freeze(SweRlReporter.prototype); // the code under test reaches this module through require's cache
module.exports = Object.freeze(SweRlReporter);
