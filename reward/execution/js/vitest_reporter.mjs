// vitest's reporter (`--reporter`): every file's tests once the run finished (vitest's task tree).
import emit from './swe_rl_emit.cjs';

const STATES = { pass: 'passed', fail: 'failed' }; // skip, todo, or never run: skipped

export default class SweRlReporter {
  onFinished(files = [], errors = []) {
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
