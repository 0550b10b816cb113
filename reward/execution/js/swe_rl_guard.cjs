'use strict';
// Loaded first by every node process of a JavaScript test run (NODE_OPTIONS=--require), before
// any repository code. Code under test runs in the same process, so nothing here is out of its
// reach for good; what this file does instead is make each way of switching it off either
// impossible or a finding that the code cannot hide:
//
// - Its word goes to PID 1 on a socket (inside.GuardReader) at a descriptor number drawn per run
//   and named in no variable, with a secret read from that socket before any code under test
//   runs (nothing of it is left to read; a socket cannot be reopened through /proc/self/fd). A
//   finding is written there at once, and the run's end ("end") only at the process's exit and
//   only when nothing was found: code that closes the descriptor, removes the exit listener or
//   ends the process by a signal leaves the run without its end, which the host counts as
//   tampered (runner.py). A child process (node's runner's files, vitest's forks) gets a channel
//   of its own from its parent's guard (an extra stdio pipe with a fresh secret): its findings
//   become the parent's, and a child that exits without its end (not by a signal, nor killed by
//   its parent) is a finding. A process with no channel (a worker thread, a child spawned some other way) says
//   a finding on its stderr after the run's token, and relies on what is refused (below).
// - The functions the tests' assertions go through (node's assert, assert.strict, Object.is;
//   jest's Object.is in each test file's context; mocha's Runner and Runnable methods) are
//   replaced by non-configurable accessors: an assignment is ignored and is a finding at the
//   moment it happens (a one-shot patch, a patch undone in afterAll or before the exit, a
//   replacement made only inside a hook), and a redefinition throws (a getter that answers
//   differently by caller).
// - Test hooks (beforeEach, afterEach, beforeAll/before, afterAll/after) registered from a file
//   the candidate wrote (SWE_RL_CANDIDATE: the patch's files, not the test patch's) are refused
//   with a finding: a fix never needs one, a forgery rewrites outcomes in one.
// - Outcomes as the runner records them from a thrown error (jest-circus's test_fn_failure and
//   hook_failure events, mocha's Runner#fail, vitest's failTask): a test seen failing that is
//   later reported passing is a finding (jest's reporter trusts state an afterAll can rewrite).
const fs = require('fs');
const path = require('path');
const Module = require('module');
const assert = require('assert');
const crypto = require('crypto');

const KEY = Symbol.for('swe-rl.guard');
const ROOT = process.cwd(); // /testbed in the sandbox (its workdir), where the runner starts
const SECRET_LENGTH = 32; // hex characters (runner.py: secrets.token_hex(16))
if (!globalThis[KEY]) {
  const { writeSync, fstatSync, readSync, readdirSync } = fs;
  if (!process.env.SWE_RL_GUARD_TOKEN) process.env.SWE_RL_GUARD_TOKEN = crypto.randomBytes(12).toString('hex');
  const first = !process.env.SWE_RL_GUARD_PID;
  if (first) process.env.SWE_RL_GUARD_PID = String(process.pid);
  const token = process.env.SWE_RL_GUARD_TOKEN;
  const reportFd = first ? Number(process.env.SWE_RL_REPORT_FD) : NaN;
  let candidate = new Set();
  try {
    candidate = new Set(JSON.parse(process.env.SWE_RL_CANDIDATE || '[]'));
  } catch (error) {
    // not a list: no file is the candidate's
  }
  // A worker thread (node's loader hooks thread among them) shares its process's descriptors,
  // whose secret the main thread has read: it opens none.
  const mainThread = require('worker_threads').isMainThread;
  const channel = !mainThread ? null : first ? openChannel() : childChannel();
  // What the guard keeps, in objects without a prototype, read with `in` and `for...in`: the
  // code under test may replace Array's and Set's methods (includes, push, has, an iterator)
  // to make the guard forget a finding.
  const bag = () => Object.create(null);
  const findings = bag();
  let found = 0;
  const join = (list, glue) => {
    let text = '';
    for (let i = 0; i < list.length; i++) text += (i ? glue : '') + String(list[i]);
    return text;
  };

  const say = (line) => {
    if (!channel) return false;
    try {
      if (fstatSync(channel.fd).ino !== channel.ino) return false; // another file at its number
      writeSync(channel.fd, `${channel.secret} ${line}\n`);
      return true;
    } catch (error) {
      return false; // closed: the run ends without the guard's end
    }
  };
  const finding = (why) => {
    if (why in findings) return;
    findings[why] = true;
    found += 1;
    if (say(`tampered ${why.replace(/\s+/g, ' ')}`)) return;
    try {
      writeSync(2, `\n${token} tampered: ${why}\n`); // a child: node's runner's reporter, or the host, reads it
    } catch (error) {
      // stderr closed: what was refused stays refused
    }
  };

  // The innermost frame of the current call stack that is neither node's nor a dependency's nor
  // this harness's: where the call comes from. V8's structured frames, read through a
  // prepareStackTrace of this file's own (a repository's own one is kept and answered for others).
  let collecting = false;
  let theirPrepare = Error.prepareStackTrace;
  const collect = (error, frames) => frames;
  Object.defineProperty(Error, 'prepareStackTrace', {
    configurable: false,
    enumerable: false,
    get: () => (collecting ? collect : theirPrepare),
    set: (value) => {
      theirPrepare = value;
    },
  });
  const HARNESS = path.dirname(__filename);
  // V8's own functions, kept as they are now: code under test that replaces captureStackTrace or
  // a call site's getFileName (it can reach their prototype through a prepareStackTrace) cannot
  // make a frame of its own read as another file's.
  const captureStackTrace = Error.captureStackTrace;
  const apply = Reflect.apply;
  const isArray = Array.isArray;
  const fileName = (() => {
    const probe = {};
    collecting = true;
    try {
      captureStackTrace(probe);
      const site = isArray(probe.stack) && probe.stack[0];
      const get = site && Object.getPrototypeOf(site).getFileName;
      return typeof get === 'function' ? (frame) => apply(get, frame, []) : () => undefined;
    } finally {
      collecting = false;
    }
  })();
  const callers = () => {
    const holder = {};
    const limit = Error.stackTraceLimit;
    collecting = true;
    try {
      Error.stackTraceLimit = 80;
      captureStackTrace(holder, callers);
      const frames = holder.stack;
      if (!isArray(frames)) return null;
      const files = []; // a loop, not map/filter: Array.prototype is the code under test's too
      for (let i = 0; i < frames.length; i++) {
        const file = fileName(frames[i]);
        if (file) files[files.length] = String(file);
      }
      return files;
    } catch (error) {
      return null; // the limit made read-only, or the frames kept from this file: nobody can be told apart
    } finally {
      collecting = false;
      try {
        Error.stackTraceLimit = limit;
      } catch (error) {
        // made read-only by someone: left as it is
      }
    }
  };
  const rel = (file) => {
    let name = String(file);
    if (name.startsWith('file://')) {
      try {
        name = decodeURIComponent(new URL(name).pathname);
      } catch (error) {
        return name;
      }
    }
    return name.startsWith(ROOT + '/') ? name.slice(ROOT.length + 1).split('?')[0] : name;
  };
  const own = (file) =>
    file.startsWith('node:') ||
    file.startsWith(HARNESS + '/') ||
    file.includes('/node_modules/') ||
    !(file.startsWith('/') || file.startsWith('file://'));
  // The candidate's file the call comes from, or null; "(unknown)" when the stack cannot be read.
  const fromCandidate = () => {
    const files = callers();
    if (files === null) return '(unknown)';
    for (const file of files) {
      if (own(file)) continue;
      const name = rel(file);
      return candidate.has(name) ? name : null;
    }
    return null;
  };

  // A property made a non-configurable accessor: reading gives the value it had (or one a
  // caller `allowed` set), an assignment of another value is ignored and is a finding.
  const watch = (target, name, label, allowed) => {
    const desc = Object.getOwnPropertyDescriptor(target, name);
    if (!desc || !desc.configurable) return;
    let value = desc.get ? desc.get.call(target) : desc.value;
    Object.defineProperty(target, name, {
      configurable: false,
      enumerable: desc.enumerable,
      get: () => value,
      set: (next) => {
        if (next === value) return;
        if (allowed && allowed()) {
          value = next;
          return;
        }
        finding(`${label} was replaced`);
      },
    });
  };
  const watchFunctions = (target, label) => {
    for (const name of Object.keys(target)) if (typeof target[name] === 'function') watch(target, name, `${label}.${name}`);
  };
  // A set is allowed unless the innermost file on the stack that is not a dependency's is a
  // candidate's (the repository's own setup files may wrap a global; a runner sets its globals
  // from node_modules), and only from some file: a builtin used as a trampoline has none.
  const notCandidate = () => {
    const files = (callers() || []).filter((f) => !f.startsWith('node:') && !f.startsWith(HARNESS + '/') && (f.startsWith('/') || f.startsWith('file://')));
    if (files.length === 0) return false;
    const first = files.find((f) => !f.includes('/node_modules/'));
    return first === undefined || !candidate.has(rel(first));
  };
  // A global made a watched accessor before the runner defines it (mocha's it, describe, ...).
  const watchGlobal = (name, label) => {
    if (Object.prototype.hasOwnProperty.call(globalThis, name)) return watch(globalThis, name, label, notCandidate);
    let value;
    Object.defineProperty(globalThis, name, {
      configurable: false,
      enumerable: true,
      get: () => value,
      set: (next) => {
        if (next === value) return;
        if (notCandidate()) value = next;
        else finding(`${label} was replaced`);
      },
    });
  };

  watchFunctions(assert, 'assert');
  if (assert.strict && assert.strict !== assert) watchFunctions(assert.strict, 'assert.strict');
  watch(Object, 'is', 'Object.is'); // what jest's and vitest's toBe compare with
  for (const name of ['_load', '_resolveFilename']) watch(Module, name, `Module.${name}`, notCandidate);
  watch(Module.prototype, 'require', 'Module.prototype.require', notCandidate);

  // Each child a process with a channel spawns gets one of its own: an extra stdio pipe (its
  // index in SWE_RL_GUARD_FD, this process's pid in SWE_RL_GUARD_PPID: a grandchild started some
  // other way reads nothing) with a fresh secret on it. Its lines come back here: a finding is
  // this process's finding, "pass <titles>" confirms a test node's runner will report (below),
  // and a child that exits by itself without its end, unless this process killed it, is a finding.
  const confirmed = bag();
  if (channel) {
    const { ChildProcess } = require('child_process');
    const spawn = ChildProcess.prototype.spawn;
    ChildProcess.prototype.spawn = function (options, ...rest) {
      if (!options || typeof options !== 'object' || !Array.isArray(options.envPairs)) return spawn.call(this, options, ...rest);
      const stdio = options.stdio === undefined ? ['pipe', 'pipe', 'pipe'] : options.stdio;
      const list = typeof stdio === 'string' ? [stdio, stdio, stdio] : [...stdio];
      while (list.length < 3) list.push(undefined);
      const index = list.length;
      list.push('pipe');
      const secret = crypto.randomBytes(SECRET_LENGTH / 2).toString('hex');
      const envPairs = options.envPairs.filter((p) => !/^SWE_RL_GUARD_(FD|PPID)=/.test(p));
      envPairs.push(`SWE_RL_GUARD_FD=${index}`, `SWE_RL_GUARD_PPID=${process.pid}`);
      const out = spawn.call(this, { ...options, stdio: list, envPairs }, ...rest);
      const pipe = this.stdio && this.stdio[index];
      if (!pipe) return out;
      const file = String((options.args || []).slice(-1)[0] || '');
      let buffered = '';
      let ended = false;
      let killed = false;
      pipe.on('error', () => {});
      pipe.on('data', (chunk) => {
        buffered += chunk.toString('latin1');
        let at;
        while ((at = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, at);
          buffered = buffered.slice(at + 1);
          if (!line.startsWith(secret + ' ')) {
            finding('a line without its guard\'s secret came from a child process');
            continue;
          }
          const rest = line.slice(secret.length + 1);
          if (rest === 'end') ended = true;
          else if (rest.startsWith('tampered ')) finding(rest.slice('tampered '.length));
          else if (rest.startsWith('pass ')) confirmed[`${rel(file)}::${rest.slice(5)}`] = true;
          else if (rest.startsWith('fail ')) sawFailing(`${rel(file)}::${rest.slice(5)}`);
        }
      });
      const kill = this.kill;
      this.kill = function (...args) {
        killed = true;
        return kill.apply(this, args);
      };
      // 'close': after its exit and its pipes' end, the guard's last line read. A child ended by
      // a signal is left alone (a test may stop a server it started with process.kill): what it
      // replaced was refused when it tried, and said then.
      this.once('close', (code, signal) => {
        if (!ended && !killed && signal === null) finding(`a test process (${rel(file)}) exited ${code} without its guard's end`);
      });
      pipe.unref();
      pipe.write(secret);
      return out;
    };
    watch(ChildProcess.prototype, 'spawn', 'ChildProcess.prototype.spawn');
  }

  // Test hooks: refused from a candidate's file.
  const hook = (kind) => {
    const file = fromCandidate();
    if (file === null) return;
    const why = `${file} registered ${kind.startsWith('a ') ? kind : `a test hook (${kind})`}`;
    finding(why);
    throw new Error(`the harness refuses this: ${why}`);
  };
  // Outcomes as the runner recorded them: ids ("<file>::<titles joined by ' > '>") seen failing.
  const failed = bag();
  const sawFailing = (id) => {
    failed[id] = true;
  };
  const reportedPassing = (id) => {
    if (id in failed) finding(`${id} was seen failing, then reported passing`);
  };

  // node's runner's reported passes, checked against its files' processes' "pass" at the end
  const passes = bag();
  const reportedPassingNode = (id) => {
    reportedPassing(id);
    if (channel) passes[id] = true;
  };
  const changed = () => {
    if (require('assert') !== assert) return 'the assert module was replaced';
    return null;
  };
  const check = () => {
    const why = changed();
    if (why) finding(why);
    for (const id in passes) {
      if (!(id in confirmed)) finding(`${id} was reported passing, but its process's guard did not see it pass`);
    }
  };

  // jest (in band: the test files run in this process, each in a vm context of its own):
  // jest-circus's adapter is wrapped when jest loads it, to see each file's environment.
  const jestAdapter = (adapter) =>
    async function sweRlJestAdapter(globalConfig, config, environment, runtime, testPath, ...rest) {
      const file = rel(testPath);
      const theirs = environment.handleTestEvent;
      const titles = (test) => {
        const names = [];
        for (let node = test; node && node.parent; node = node.parent) names.unshift(node.name);
        return names;
      };
      environment.handleTestEvent = function (event, state) {
        if (event.name === 'setup') {
          // the context's own Object.is (expect's toBe) and the globals just installed
          const context = environment.global;
          if (context && context.Object && context.Object !== Object) watch(context.Object, 'is', 'Object.is (test context)');
          for (const name of ['expect', 'describe', 'it', 'test', 'beforeEach', 'afterEach', 'beforeAll', 'afterAll']) {
            if (context && name in context) watch(context, name, `the test global ${name}`, notCandidate);
          }
        } else if (event.name === 'add_hook') {
          hook(event.hookType);
        } else if (event.name === 'add_test' || event.name === 'start_describe_definition') {
          hook(event.name === 'add_test' ? 'a test' : 'a suite');
        } else if ((event.name === 'test_fn_failure' || event.name === 'hook_failure') && event.test) {
          sawFailing(`${file}::${join(titles(event.test), ' > ')}`);
        }
        return theirs ? theirs.call(this, event, state) : undefined;
      };
      const result = await adapter(globalConfig, config, environment, runtime, testPath, ...rest);
      for (const t of (result && result.testResults) || []) {
        if (t.status === 'passed') reportedPassing(`${file}::${join([...(t.ancestorTitles || []), t.title], ' > ')}`);
      }
      return result;
    };

  // mocha (its tests in this process): the runner's failure path locked, hooks checked.
  const mochaRunner = (Runner) => {
    const fail = Runner.prototype.fail;
    if (typeof fail === 'function') {
      Runner.prototype.fail = function (test, error, ...rest) {
        if (test && test.type !== 'hook' && typeof test.titlePath === 'function') {
          sawFailing(`${rel(test.file)}::${join(test.titlePath().filter((t) => t !== ''), ' > ')}`);
        }
        return fail.call(this, test, error, ...rest);
      };
    }
    for (const name of ['fail', 'emit', 'runTest', 'runTests', 'hook', 'hooks', 'run']) {
      if (!Object.prototype.hasOwnProperty.call(Runner.prototype, name)) {
        Object.defineProperty(Runner.prototype, name, { value: Runner.prototype[name], writable: true, configurable: true });
      }
      watch(Runner.prototype, name, `mocha's Runner.prototype.${name}`);
    }
  };
  const mochaSuite = (Suite) => {
    for (const [name, kind] of [['addTest', 'a test'], ['addSuite', 'a suite']]) {
      const theirs = Suite.prototype[name];
      if (typeof theirs !== 'function') continue;
      Suite.prototype[name] = function (...args) {
        hook(kind);
        return theirs.apply(this, args);
      };
      watch(Suite.prototype, name, `mocha's Suite.prototype.${name}`);
    }
    for (const name of ['beforeAll', 'afterAll', 'beforeEach', 'afterEach']) {
      const theirs = Suite.prototype[name];
      if (typeof theirs !== 'function') continue;
      Suite.prototype[name] = function (...args) {
        hook(name);
        return theirs.apply(this, args);
      };
      watch(Suite.prototype, name, `mocha's Suite.prototype.${name}`);
    }
  };
  const mochaRunnable = (Runnable) => {
    for (const name of ['run', 'clearTimeout', 'resetTimeout']) watch(Runnable.prototype, name, `mocha's Runnable.prototype.${name}`);
  };
  // mocha's interfaces set their functions as globals for each file: set from a candidate's file
  // (a wrapped it() that gives one test an empty body) they are refused.
  if (/[\\/]mocha[\\/]bin[\\/]|[\\/]\.bin[\\/]_?mocha$/.test(String(process.argv[1] || ''))) {
    const names = ['describe', 'context', 'it', 'specify', 'xdescribe', 'xcontext', 'xit', 'xspecify', 'before', 'after',
      'beforeEach', 'afterEach', 'suite', 'test', 'suiteSetup', 'suiteTeardown', 'setup', 'teardown'];
    for (const name of names) watchGlobal(name, `the test global ${name}`);
  }
  const WRAPPED = [
    [/[\\/]jest-circus[\\/]runner\.js$/, (exports) => jestAdapter(exports)],
    [/[\\/]mocha[\\/]lib[\\/]runner\.js$/, (exports) => (mochaRunner(exports), exports)],
    [/[\\/]mocha[\\/]lib[\\/]suite\.js$/, (exports) => (mochaSuite(exports), exports)],
    [/[\\/]mocha[\\/]lib[\\/]runnable\.js$/, (exports) => (mochaRunnable(exports), exports)],
  ];
  const load = Module.prototype.load;
  Module.prototype.load = function (filename, ...rest) {
    const out = load.call(this, filename, ...rest);
    for (const [pattern, wrap] of WRAPPED) {
      if (pattern.test(String(filename)) && typeof this.exports === 'function') {
        try {
          this.exports = wrap(this.exports);
        } catch (error) {
          finding(`the harness could not watch ${rel(filename)}: ${error && error.message}`);
        }
      }
    }
    return out;
  };
  watch(Module.prototype, 'load', 'Module.prototype.load');

  // node's test runner: a file's process (NODE_TEST_CONTEXT) gets node:test's hook functions
  // checked (one registered from a candidate's file is refused) and its tests watched where node
  // runs their bodies (Test#run calls AsyncResource#runInAsyncScope; wrapping test() itself would
  // make this file the tests' location): a body that returned (or resolved, or called back
  // without an error) says "pass <titles>" to the runner's process, one that threw "fail
  // <titles>", and the reporter there counts a reported pass without its "pass" as a finding
  // (code under test can write the runner's own serialized events to the file's stdout).
  if (process.env.NODE_TEST_CONTEXT) {
    const nodeTest = require('node:test');
    for (const name of ['before', 'after', 'beforeEach', 'afterEach']) {
      const theirs = nodeTest[name];
      if (typeof theirs !== 'function') continue;
      const mine = function (...args) {
        hook(name);
        return theirs.apply(this, args);
      };
      try {
        Object.defineProperty(nodeTest, name, { value: mine, writable: false, configurable: false, enumerable: true });
      } catch (error) {
        // already locked by node: left as it is
      }
    }
    const { AsyncResource } = require('async_hooks');
    const runIn = AsyncResource.prototype.runInAsyncScope;
    AsyncResource.prototype.runInAsyncScope = function (fn, thisArg, ...args) {
      const test = this && this.constructor && this.constructor.name === 'Test' && this.parent;
      if (!test || typeof fn !== 'function') return runIn.call(this, fn, thisArg, ...args);
      const frames = (callers() || []).filter((f) => !f.startsWith(HARNESS + '/'));
      if (frames[0] !== 'node:internal/test_runner/test') return runIn.call(this, fn, thisArg, ...args);
      const titles = [];
      for (let node = this; node && node.parent; node = node.parent) titles.unshift(String(node.name));
      const said = (word) => say(`${word} ${join(titles, ' > ')}`);
      const done = args[args.length - 1];
      if (args.length >= 2 && typeof done === 'function') {
        // node's callback style (test(name, (t, done) => ...)): the outcome is the callback's
        args[args.length - 1] = function (error, ...more) {
          said(error ? 'fail' : 'pass');
          return done.call(this, error, ...more);
        };
        return runIn.call(this, fn, thisArg, ...args);
      }
      let out;
      try {
        out = runIn.call(this, fn, thisArg, ...args);
      } catch (error) {
        said('fail');
        throw error;
      }
      if (out && typeof out.then === 'function') {
        return out.then(
          (value) => (said('pass'), value),
          (error) => {
            said('fail');
            throw error;
          },
        );
      }
      said('pass');
      return out;
    };
    watch(AsyncResource.prototype, 'runInAsyncScope', 'AsyncResource.prototype.runInAsyncScope');
  }

  // vitest: its runner (@vitest/runner, an ES module) is read through a loader hook of this
  // harness (swe_rl_hooks.mjs) that makes its hook functions and failTask call `api` below.
  const marked = new WeakSet();
  const api = Object.freeze({
    check,
    hook,
    sawFailing,
    reportedPassing,
    reportedPassingNode,
    // vitest's failTask: the result's state stays "fail" for everyone but vitest's own runner
    failTask(result) {
      if (!result || typeof result !== 'object' || marked.has(result)) return;
      marked.add(result);
      let state = result.state;
      const vitest = () => {
        const files = (callers() || []).filter((f) => !f.startsWith('node:') && !f.startsWith(HARNESS + '/'));
        return files.length > 0 && /[\\/]node_modules[\\/](@vitest|vitest)[\\/]/.test(files[0]);
      };
      try {
        Object.defineProperty(result, 'state', {
          configurable: false,
          enumerable: true,
          get: () => state,
          set: (next) => {
            if (next === state) return;
            if (vitest()) state = next;
            else finding("a failed test's result was rewritten after its failure was recorded");
          },
        });
      } catch (error) {
        // not configurable: someone got there first
        finding("a failed test's result could not be watched");
      }
    },
  });
  Object.defineProperty(globalThis, KEY, { value: api, enumerable: false, writable: false, configurable: false });
  const vitestWorker = /vitest|tinypool/.test(String(process.argv[1] || '')) || process.env.VITEST_POOL_ID !== undefined;
  if (vitestWorker && mainThread && typeof Module.register === 'function') {
    try {
      Module.register(require('url').pathToFileURL(path.join(HARNESS, 'swe_rl_hooks.mjs')).href);
    } catch (error) {
      // a node without loader hooks: vitest's runner is not watched
    }
  }

  // A worker its runner ends with a signal (vitest's forks: no 'exit' event) checks before each
  // message it sends its parent, the tests' results among them.
  if (!first && typeof process.send === 'function') {
    const send = process.send;
    process.send = function (...args) {
      check();
      return send.apply(this, args);
    };
    watch(process, 'send', 'process.send');
  }
  process.on('exit', (code) => {
    check();
    // A runner that stops before its first test (mocha, when a test file fails to load: the
    // import of a module the fix adds) never starts its reporter: its end is said here, with
    // the failure, as pytest reports a collection error. Once a test was reported, an exit
    // without the reporter's end stays a run that did not end by itself.
    const state = globalThis[Symbol.for('swe-rl.state')];
    if (first && Number.isInteger(reportFd) && reportFd >= 0 && !(state && (state.ended || state.records))) {
      try {
        const why = `the test runner exited ${code} before its first test`;
        writeSync(reportFd, JSON.stringify({ id: '(load)', when: 'collect', outcome: 'failed', message: why }) + '\n');
        writeSync(reportFd, JSON.stringify({ exit: typeof code === 'number' ? code : 1 }) + '\n');
      } catch (error) {
        // the stream is closed: the run is no_report
      }
    }
    if (found === 0) say('end');
  });

  // A child's socket: the stdio pipe its parent's guard added, its secret read (above).
  function childChannel() {
    const fd = Number(process.env.SWE_RL_GUARD_FD);
    if (!Number.isInteger(fd) || fd < 3 || process.env.SWE_RL_GUARD_PPID !== String(process.ppid)) return null;
    let stat;
    try {
      stat = fstatSync(fd);
    } catch (error) {
      return null;
    }
    if (!stat.isSocket()) return null;
    const secret = readSecret(fd);
    return secret ? { fd, ino: stat.ino, secret } : null;
  }

  function readSecret(fd) {
    const buffer = Buffer.alloc(SECRET_LENGTH);
    const pause = new Int32Array(new SharedArrayBuffer(4));
    let got = 0;
    for (let tries = 0; got < SECRET_LENGTH && tries < 6000; tries++) {
      try {
        const n = readSync(fd, buffer, got, SECRET_LENGTH - got, null);
        if (n <= 0) break;
        got += n;
      } catch (error) {
        if (error.code !== 'EAGAIN') break;
        Atomics.wait(pause, 0, 0, 5); // a non-blocking pipe: its parent writes at once
      }
    }
    return got === SECRET_LENGTH ? buffer.toString('latin1') : null;
  }

  // The first process's socket: the one descriptor above 63 that is a socket, its secret read.
  function openChannel() {
    let fds = [];
    try {
      fds = readdirSync('/proc/self/fd').map(Number);
    } catch (error) {
      for (let fd = 64; fd < 1024; fd++) fds.push(fd);
    }
    for (const fd of fds) {
      if (!(fd >= 64 && fd < 1024)) continue;
      let stat;
      try {
        stat = fstatSync(fd);
      } catch (error) {
        continue;
      }
      if (!stat.isSocket()) continue;
      const secret = readSecret(fd);
      if (secret) return { fd, ino: stat.ino, secret };
    }
    return null;
  }
}
