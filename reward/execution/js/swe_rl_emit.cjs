'use strict';
// The harness's report stream for JavaScript runners: one JSON line per test to the pipe named by
// SWE_RL_REPORT_FD (held by the sandbox's PID 1), in the format of the pytest recorder
// (reward/execution/report.py). Ids are `<path from the repository root>::<titles joined by " > ">`;
// a name a file repeats gets " #2", " #3" (a report may name a test once), and the first of
// them a failed teardown: no run of a repeated name passes (code under test that registers a
// passing twin of a failing test, reported first, decides nothing).
const fs = require('fs');
const path = require('path');

const ROOT = '/testbed';
const fd = Number(process.env.SWE_RL_REPORT_FD);
const writeSync = fs.writeSync; // as it was when the reporter loaded, before any test
const seen = new Map();
// What the guard reads at the process's exit (swe_rl_guard.cjs): records written, the end said.
const STATE = Symbol.for('swe-rl.state');
const state = globalThis[STATE] || (globalThis[STATE] = { records: 0, ended: false });

function write(record) {
  if (!Number.isInteger(fd) || fd < 0) return;
  writeSync(fd, JSON.stringify(record) + '\n');
  state.records += 1;
}

function rel(file) {
  let name = String(file || '');
  if (name.startsWith('file://')) name = decodeURIComponent(new URL(name).pathname);
  if (path.isAbsolute(name)) name = path.relative(ROOT, name);
  return name.split(path.sep).join('/');
}

function unique(id) {
  const count = (seen.get(id) || 0) + 1;
  seen.set(id, count);
  if (count === 2) {
    const why = 'the file reports this test name more than once: no run of it counts';
    write({ id, when: 'teardown', outcome: 'failed', message: why });
  }
  return count === 1 ? id : `${id} #${count}`;
}

function test(file, titles, when, outcome, error) {
  const id = `${rel(file)}::${titles.filter((t) => t !== '').join(' > ')}`;
  const guard = globalThis[Symbol.for('swe-rl.guard')];
  if (outcome === 'passed' && guard) guard.reportedPassing(id); // seen failing by the runner: a finding
  const record = { id: unique(id), when, outcome };
  if (outcome === 'failed' && error !== undefined) record.message = message(error);
  write(record);
}

function collect(file, error) {
  write({ id: unique(rel(file)), when: 'collect', outcome: 'failed', message: message(error) });
}

function message(error) {
  let text = error;
  if (error && typeof error === 'object') text = error.message || error.stack || String(error);
  const first = String(text === undefined ? '' : text).split('\n').find((line) => line.trim() !== '') || '';
  return first.trim().slice(0, 240);
}

function exit(code) {
  const guard = globalThis[Symbol.for('swe-rl.guard')];
  if (guard) guard.check(); // its finding goes before the session's end
  write({ exit: code });
  state.ended = true;
}

// Frozen: the code under test (in the reporter's process under jest and mocha) gets this same
// module from require's cache, and must not swap a function the reporters call.
module.exports = Object.freeze({ write, rel, test, collect, message, exit });
