// A loader hook (node's module.register, from swe_rl_guard.cjs in vitest's processes): vitest's
// runner (@vitest/runner, an ES module that no --require can wrap) is loaded with two changes
// that call the guard (globalThis[Symbol.for('swe-rl.guard')]): its hook functions (beforeAll,
// afterAll, beforeEach, afterEach) first ask whether the caller may register one, and failTask,
// once it recorded a failure, hands the guard the result so that its state stays "fail" for
// everyone but vitest's own runner. A version whose source does not read as expected is loaded
// as it is (and is then not watched).
const RUNNER = /[\\/]node_modules[\\/]@vitest[\\/]runner[\\/]dist[\\/]index\.js$/;
const GUARD = "globalThis[Symbol.for('swe-rl.guard')]";

export function rewrite(source) {
  let text = source;
  for (const name of ['beforeAll', 'afterAll', 'beforeEach', 'afterEach']) {
    text = text.replace(`function ${name}(fn, timeout) {`, (head) => `${head} ${GUARD}?.hook?.(${JSON.stringify(name)});`);
  }
  const head = 'function failTask(result, err, diffOptions) {';
  if (text.includes(head)) {
    text = text.replace(head, 'function failTask$sweRl(result, err, diffOptions) {');
    text += `\nfunction failTask(result, err, diffOptions) {\n  failTask$sweRl(result, err, diffOptions);\n`;
    text += `  if (result && result.state === 'fail') ${GUARD}?.failTask?.(result);\n}\n`;
  }
  return text;
}

export async function load(url, context, nextLoad) {
  const loaded = await nextLoad(url, context);
  if (!RUNNER.test(url) || loaded.source == null) return loaded;
  return { ...loaded, source: rewrite(String(loaded.source)), shortCircuit: true };
}
