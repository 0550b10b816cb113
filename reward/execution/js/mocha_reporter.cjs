'use strict';
// mocha's reporter (`--reporter`): each test as it ends; a failed hook is its own record ("setup").
const emit = require('./swe_rl_emit.cjs');

function SweRlReporter(runner) {
  let failed = 0;
  const titles = (t) => (typeof t.titlePath === 'function' ? t.titlePath() : [t.fullTitle()]);
  runner.on('pass', (t) => emit.test(t.file, titles(t), 'call', 'passed'));
  runner.on('pending', (t) => emit.test(t.file, titles(t), 'call', 'skipped'));
  runner.on('fail', (t, error) => {
    failed += 1;
    emit.test(t.file, titles(t), t.type === 'hook' ? 'setup' : 'call', 'failed', error);
  });
  runner.once('end', () => emit.exit(failed ? 1 : 0));
}

module.exports = Object.freeze(SweRlReporter); // the code under test reaches this module through require's cache
