// node's own test runner's reporter (`--test-reporter`): the events of every test file, in
// order per file; a test's titles are its ancestors' names, read from the start events.
import emit from './swe_rl_emit.cjs';

export default async function* sweRlReporter(source) {
  const stacks = new Map();
  const said = `${process.env.SWE_RL_GUARD_TOKEN} tampered: `; // a file's process, through the guard
  let failed = 0;
  for await (const event of source) {
    const data = event.data || {};
    if ((event.type === 'test:stderr' || event.type === 'test:stdout') && String(data.message).includes(said)) {
      emit.write({ tampered: String(data.message).split(said)[1].trim() });
    } else if (event.type === 'test:start') {
      const stack = stacks.get(data.file) || [];
      stack.length = data.nesting;
      stack.push(data.name);
      stacks.set(data.file, stack);
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      const details = data.details || {};
      const ok = event.type === 'test:pass';
      if (details.type === 'suite' && (ok || (details.error && details.error.failureType === 'subtestsFailed'))) continue;
      if (!ok) failed += 1;
      if (data.nesting === 0 && data.file && emit.rel(data.file) === emit.rel(data.name)) {
        emit.collect(data.file, details.error);
        continue;
      }
      const titles = (stacks.get(data.file) || []).slice(0, data.nesting).concat([data.name]);
      const outcome = data.skip !== undefined || data.todo !== undefined ? 'skipped' : ok ? 'passed' : 'failed';
      const guard = globalThis[Symbol.for('swe-rl.guard')];
      if (outcome === 'passed' && guard) guard.reportedPassingNode(`${emit.rel(data.file)}::${titles.filter((t) => t !== '').join(' > ')}`);
      emit.test(data.file, titles, 'call', outcome, details.error);
    }
  }
  emit.exit(failed ? 1 : 0);
}
