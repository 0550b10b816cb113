// vitest's reporter (`--reporter`): every file's tests once the run finished, from vitest's
// task tree (`onFinished`, vitest 0.x to 3) or its test modules (`onTestRunEnd`, vitest 3 on;
// vitest 4 calls only this one); whichever comes first reports, once. Files vitest only
// type-checked (its `typecheck` settings: tsc, no test body runs) are not reported.
import emit from './swe_rl_emit.cjs';

const STATES = { pass: 'passed', fail: 'failed', passed: 'passed', failed: 'failed' }; // else skipped

export default class SweRlReporter {
  constructor() {
    this.done = false;
  }

  onTestRunEnd(modules = [], errors = []) {
    if (this.done) return;
    this.done = true;
    let failed = errors.length;
    for (const module of modules) {
      const task = module.task || {};
      if (task.meta && task.meta.typecheck) continue;
      const file = module.moduleId;
      const tests = module.children ? [...module.children.allTests()] : [];
      const state = typeof module.state === 'function' ? module.state() : '';
      if (tests.length === 0 && state === 'failed') {
        failed += 1;
        emit.collect(file, (module.errors ? module.errors() : [])[0]);
        continue;
      }
      for (const test of tests) {
        const result = test.result() || {};
        const outcome = STATES[result.state] || 'skipped';
        if (outcome === 'failed') failed += 1;
        const titles = [];
        for (let node = test.parent; node && node.type === 'suite'; node = node.parent) titles.unshift(node.name);
        emit.test(file, [...titles, test.name], 'call', outcome, (result.errors || [])[0]);
      }
    }
    emit.exit(failed ? 1 : 0);
  }

  onFinished(files = [], errors = []) {
    if (this.done) return;
    this.done = true;
    let failed = errors.length;
    const walk = (task, file, titles) => {
      if (task.type === 'test' || task.type === 'custom') {
        const result = task.result || {};
        const outcome = STATES[result.state] || 'skipped';
        if (outcome === 'failed') failed += 1;
        emit.test(file, [...titles, task.name], 'call', outcome, (result.errors || [])[0]);
        return;
      }
      const inner = task.type === 'suite' && task.file !== task ? [...titles, task.name] : titles;
      for (const child of task.tasks || []) walk(child, file, inner);
    };
    for (const file of files) {
      if (file.meta && file.meta.typecheck) continue; // type-checked by tsc, never run
      const result = file.result || {};
      if (result.state === 'fail' && !(file.tasks || []).length) {
        failed += 1;
        emit.collect(file.filepath, (result.errors || [])[0]);
        continue;
      }
      for (const child of file.tasks || []) walk(child, file.filepath, []);
    }
    emit.exit(failed ? 1 : 0);
  }
}
