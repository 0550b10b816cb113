'use strict';
// Loaded first by every node process of a JavaScript test run (NODE_OPTIONS=--require): it
// keeps node's assertion functions as they were before any repository code ran, and reports
// `{"tampered": why}` on the report stream when one was replaced (code under test that turns
// failed assertions into passes), at the run's end (swe_rl_emit.cjs asks) and when a process
// of a runner that isolates its files (node's test runner, vitest's forks) exits. The report's
// pipe is the first process's only (a child has no such descriptor): a child says it on its
// stderr with the run's token (the host's, SWE_RL_GUARD_TOKEN), which node's test runner hands
// its reporter as an event, and which the host finds in the run's output (vitest's forks).
const fs = require('fs');
const assert = require('assert');
const crypto = require('crypto');

const KEY = Symbol.for('swe-rl.guard');
if (!globalThis[KEY]) {
  const writeSync = fs.writeSync;
  if (!process.env.SWE_RL_GUARD_TOKEN) process.env.SWE_RL_GUARD_TOKEN = crypto.randomBytes(12).toString('hex');
  if (!process.env.SWE_RL_GUARD_PID) process.env.SWE_RL_GUARD_PID = String(process.pid);
  const token = process.env.SWE_RL_GUARD_TOKEN;
  const first = process.env.SWE_RL_GUARD_PID === String(process.pid);
  const fd = first ? Number(process.env.SWE_RL_REPORT_FD) : NaN;
  const kept = (target) => Object.keys(target).filter((k) => typeof target[k] === 'function').map((k) => [k, target[k]]);
  const plain = kept(assert);
  const strict = assert.strict ? kept(assert.strict) : [];
  // What jest's and vitest's `toBe` and `toEqual` compare with (they read the globals).
  const objectIs = Object.is;
  let reported = false;
  const changed = () => {
    if (require('assert') !== assert) return 'the assert module was replaced';
    if (Object.is !== objectIs) return 'Object.is was replaced';
    for (const [name, fn] of plain) if (assert[name] !== fn) return `assert.${name} was replaced`;
    for (const [name, fn] of strict) if (assert.strict[name] !== fn) return `assert.strict.${name} was replaced`;
    return null;
  };
  const check = () => {
    const why = changed();
    if (!why || reported) return;
    reported = true;
    try {
      if (Number.isInteger(fd) && fd >= 0) writeSync(fd, JSON.stringify({ tampered: why }) + '\n');
      else writeSync(2, `\n${token} tampered: ${why}\n`);
    } catch (error) {
      // the stream is closed (the run ended): nothing more to say
    }
  };
  Object.defineProperty(globalThis, KEY, { value: check, enumerable: false, writable: false, configurable: false });
  // A worker its runner ends with a signal (vitest's forks: no 'exit' event) says a finding
  // before each message it sends its parent, the tests' results among them.
  if (!first && typeof process.send === 'function') {
    const send = process.send;
    process.send = function (...args) {
      check();
      return send.apply(this, args);
    };
  }
  process.on('exit', (code) => {
    check();
    // A runner that stops before its first test (mocha, when a test file fails to load: the
    // import of a module the fix adds) never starts its reporter: its end is said here, with
    // the failure, as pytest reports a collection error. Once a test was reported, an exit
    // without the reporter's end stays a run that did not end by itself.
    const state = globalThis[Symbol.for('swe-rl.state')];
    if (first && Number.isInteger(fd) && fd >= 0 && !(state && (state.ended || state.records))) {
      try {
        const why = `the test runner exited ${code} before its first test`;
        writeSync(fd, JSON.stringify({ id: '(load)', when: 'collect', outcome: 'failed', message: why }) + '\n');
        writeSync(fd, JSON.stringify({ exit: typeof code === 'number' ? code : 1 }) + '\n');
      } catch (error) {
        // the stream is closed: the run is no_report
      }
    }
  });
}
