"""JavaScript repositories under the harness: node's test runner, jest, mocha and vitest.

Each runs a small repository the test writes (tests/reward/jsrepos.py: the add() bug, its
package.json naming the runner, its lock made from the npm cache scripts/setup.sh fills) in
the sandbox, its dependencies installed offline with scripts off on the host and rebuilt in the
sandbox: the report's ids are `file::describe > test`, a skipped test reads skipped, the gold
patch resolves and the empty one does not, and the canaries' four tests show their outcomes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess

import pytest

from conf.config import ExecutionConfig
from data.patching import make_patch
from reward.execution import sandbox
from reward.execution.environments import EnvSpec
from reward.execution.inside import GuardReader
from reward.execution.report import Canaries
from reward.execution.runner import Runner, TestJob, command
from reward.execution.runners import RUNNERS, runner_for
from tests.reward import jsrepos

pytestmark = [
    pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}"),
    pytest.mark.skipif(jsrepos.skip_reason() is not None, reason=str(jsrepos.skip_reason())),
]
JS_RUNNERS = ("node-test", "jest", "mocha", "vitest")
TEST = "test/add.test.js"


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    cache = tmp_path_factory.mktemp("exec")
    with jsrepos.offline_npm():
        yield Runner(ExecutionConfig(cache_dir=str(cache), wall_s=120.0, cpu_s=120, output_kb=256))


@pytest.mark.parametrize("name", JS_RUNNERS)
def test_each_runner_reports_every_test_and_the_gold_patch_resolves(runner, name):
    inst = jsrepos.instance(name)
    gold, empty = runner.run(TestJob(inst, inst.patch)), runner.run(TestJob(inst, ""))
    assert (gold.status, empty.status) == ("ok", "ok"), (gold.reason, gold.log[-1500:])
    assert gold.outcomes == {f"{TEST}::adds": "passed", f"{TEST}::signs > negative": "passed",
                             f"{TEST}::signs > later": "skipped"}  # fmt: skip
    assert empty.outcomes[f"{TEST}::signs > negative"] == "failed"
    assert (gold.resolved, empty.resolved) == (True, False)


def test_the_lock_files_install_scripts_run_in_the_sandbox_never_on_the_host(tmp_path):
    """A dependency (a tarball the test packs, vendored in a git repository, named by the lock)
    whose install script writes who ran it: it ran as the sandbox's nobody into node_modules,
    the tests see what it built, and what it tried to write on the host is not there."""
    dep, repo = tmp_path / "dep", tmp_path / "repo"
    dep.mkdir()
    marker = tmp_path / "host-marker"
    build = (
        f"const fs = require('fs');\nfs.writeFileSync('built.txt', String(process.getuid()));\n"
        f"try {{ fs.writeFileSync({json.dumps(str(marker))}, 'x'); }} catch (e) {{}}\n"
    )
    (dep / "package.json").write_text(
        json.dumps({"name": "dep", "version": "1.0.0", "scripts": {"install": "node build.js"}})
    )
    (dep / "build.js").write_text(build)
    (dep / "index.js").write_text("module.exports = require('fs').readFileSync(__dirname + '/built.txt', 'utf8');\n")
    subprocess.run(["npm", "pack", "--silent"], cwd=dep, check=True, capture_output=True, timeout=60)
    package = json.dumps({"name": "calc", "version": "1.0.0", "devDependencies": {"dep": "file:vendor/dep-1.0.0.tgz"}})
    uid_test = (
        "const { test } = require('node:test');\nconst assert = require('assert');\n"
        "test('built by nobody', () => { assert.strictEqual(require('dep'), '65534'); });\n"
    )
    (repo / "vendor").mkdir(parents=True)
    shutil.copyfile(dep / "dep-1.0.0.tgz", repo / "vendor" / "dep-1.0.0.tgz")
    for rel, text in {"package.json": package, "test/uid.test.js": uid_test}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / "package-lock.json").write_text(
        jsrepos.lock_for(package, {"vendor/dep-1.0.0.tgz": str(repo / "vendor/dep-1.0.0.tgz")})
    )
    commit = committed(repo)
    spec = EnvSpec(snapshot="git", node="host", install="lock", runner="node-test")
    inst = jsrepos.instance("node-test", base_commit=commit, environment=spec.to_json(), test_patch="",
                            fail_to_pass=("test/uid.test.js::built by nobody",), pass_to_pass=())  # fmt: skip
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[f"unit/calc={repo}"], wall_s=120.0, cpu_s=120)
    with jsrepos.offline_npm():
        run = Runner(cfg).run(TestJob(inst, ""))
    assert run.status == "ok" and run.outcomes == {"test/uid.test.js::built by nobody": "passed"}, (run.reason, run.log)
    assert run.resolved is True and not marker.exists()


def test_a_candidate_that_disables_assert_in_the_same_process_is_tampered(runner):
    """mocha runs every file in one process, the canaries last: code under test that replaces
    node's assertions makes the canaries' failing check pass."""
    inst = jsrepos.instance("mocha")
    forged = jsrepos.BUG + "require('assert').strictEqual = function () {};\n"
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": forged})))
    assert run.status == "tampered" and run.resolved is False, (run.status, run.reason)


@pytest.mark.parametrize("name", JS_RUNNERS)
def test_the_canaries_follow_the_last_test_files_name_and_the_runners_style(name):
    spec = EnvSpec(node="host", install="none", runner=name)
    argv, canaries = command("/usr/bin/node", spec, ["test/a.test.js", "src/__tests__/b.spec.ts"])
    assert canaries.path.startswith("src/__tests__/c") and canaries.path.endswith(".spec.ts")
    assert argv[-1] == canaries.path and argv[0] in ("node", f"node_modules/.bin/{name}", "node_modules/.bin/_mocha")
    assert canaries.helper.endswith(".cjs") and "/" not in canaries.helper
    assert "import * as h from '../../" in canaries.source  # TypeScript: module syntax
    assert len(canaries.expected) == 4 and sorted(canaries.expected.values()) == [
        "failed",
        "failed",
        "passed",
        "passed",
    ]
    plain = Canaries.javascript(["test/a.test.js"], name, runner_for(name).canary_suffix(["test/a.test.js"]))
    if name in ("node-test", "mocha"):  # node loads it itself: .cjs is CommonJS whatever package.json says
        assert plain.path.endswith(".test.cjs") and "require('../" in plain.source
    elif name == "jest":
        assert plain.path.endswith(".test.js") and "require('../" in plain.source
    else:  # vitest compiles every file as a module
        assert plain.path.endswith(".test.js") and "from 'vitest'" in plain.source


def test_the_javascript_runners_are_registered_with_their_language():
    assert {n for n in RUNNERS.names() if runner_for(n).language == "javascript"} == set(JS_RUNNERS)
    assert runner_for("jest").takes("src/x.test.tsx") and not runner_for("jest").takes("tests/test_x.py")
    assert runner_for("pytest").takes("tests/test_x.py") and not runner_for("pytest").takes("a.test.js")


@pytest.mark.parametrize("name", ["node-test", "jest", "vitest"])
def test_a_candidate_that_disables_assert_in_an_isolated_file_is_tampered(runner, name):
    """Runners that give each test file a process (node's, vitest's forks) or a context (jest's)
    of its own: the canaries never load the candidate's module, the guard every process loads
    first finds assert replaced (a child says so on its stderr after the run's token: node's
    runner hands it to the reporter, the host reads vitest's in the run's output)."""
    inst = jsrepos.instance(name)
    forged = jsrepos.BUG + "require('assert').strictEqual = function () {};\n"
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": forged})))
    assert run.status == "tampered" and run.resolved is False, (run.status, run.reason, run.outcomes)
    assert "assert.strictEqual was replaced" in str(run.reason)


def test_an_agent_episode_in_a_javascript_repository_runs_its_tests_edits_and_resolves(runner):
    """The agent's tools in a Node repository: bash with node and the dependencies' commands on
    its PATH (the suite run by jest from node_modules/.bin), a SEARCH/REPLACE edit, submit; the
    patch is scored by the `tests` reward through the same run as training's."""
    from actors.replay import replay
    from conf.config import AgentConfig

    inst = jsrepos.instance("jest")
    fix = "```javascript\n### lib/add.js\n<<<<<<< SEARCH\n  return a + Math.abs(b);\n=======\n  return a + b;\n>>>>>>> REPLACE\n```"
    check = "node -e \"console.log(require('./lib/add').add(1, -2))\" && jest --ci test 2>&1 | tail -3"
    turns = [f"```bash\n{check}\n```", fix, f"```bash\n{check}\n```", "Done.\n```submit\n```"]
    result = replay(inst, turns, ["tests", "similarity"], runner, AgentConfig())
    assert [t["kind"] for t in result["turns"]] == ["bash", "edit", "bash", "submit"], result["turns"]
    before, after = result["turns"][0]["observation"], result["turns"][2]["observation"]
    assert "Output:\n3\n" in before and "Ran all test suites" in before  # the bug, and jest ran
    assert "Output:\n-1\n" in after
    assert result["resolved"] is True and result["rewards"] == {"tests": 1.0, "similarity": 1.0}


def test_a_test_file_that_fails_to_load_is_a_collection_error_not_a_lost_run(runner):
    """mocha stops before its first test when a file cannot load (a test patch importing a
    module only the fix adds): the run still ends with its report, the tests not passing, the
    runner's own error as the reason, as pytest's collection errors are."""
    broken = jsrepos.suite("mocha", True).replace("require('../lib/add')", "require('../lib/missing')")
    inst = jsrepos.instance("mocha", test_patch=make_patch({TEST: jsrepos.suite("mocha", False)}, {TEST: broken}))
    run = runner.run(TestJob(inst, inst.patch))
    assert run.status == "ok" and run.resolved is False, (run.status, run.reason)
    assert run.outcomes == {"(load)": "error"}
    assert "Cannot find module '../lib/missing'" in run.failures["(load)"]


def committed(repo) -> str:
    """`repo` (a folder the test wrote) as one git commit; its hash."""
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_a_derived_javascript_environment_whose_tests_import_what_the_fix_adds(tmp_path):
    """Derivation on a mocha repository (a git commit; its candidates read from package.json:
    mocha from the devDependencies, the machine's Node major): the test patch requires a module
    only the fix creates, so mocha stops before its first test at the base commit; the baseline
    is asked again with the fix and counts, and the chosen spec runs mocha with its lock."""
    from reward.execution.derivation import Deriver

    repo = tmp_path / "repo"
    base = jsrepos.instance("mocha")
    for rel, text in base.code_context.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    sub = "module.exports = (a, b) => a - b;\n"
    test = (
        jsrepos.suite("mocha", True)
        + "const sub = require('../lib/sub');\nit('subtracts', () => { assert.strictEqual(sub(3, 1), 2); });\n"
    )
    inst = jsrepos.instance(
        "mocha",
        base_commit=committed(repo),
        created_at=None,
        environment=None,
        patch=make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": jsrepos.FIX, "lib/sub.js": sub}),
        test_patch=make_patch({TEST: jsrepos.suite("mocha", False)}, {TEST: test}),
    )
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[f"unit/calc={repo}"], wall_s=120.0, cpu_s=120)
    deriver = Deriver(cfg, limit=1)
    snapshot = deriver.runner.snapshots.path(inst, EnvSpec(snapshot="git"))
    with jsrepos.offline_npm():
        derivation = deriver.derive(inst, snapshot)
    spec = derivation.spec
    assert (spec.runner, spec.install, spec.network) == ("mocha", "lock", "loopback")
    assert derivation.ok and derivation.attempts[0].counts == {"passed": 3, "skipped": 1}, derivation.record()


@pytest.mark.parametrize(
    ("name", "forgery"),
    [
        # a passing twin of the failing test, registered when the code under test loads
        ("mocha", "describe('signs', () => { it('negative', () => {}); });\n"),
        # jest's and vitest's toBe compare with the global Object.is
        ("vitest", "Object.is = () => true;\n"),
    ],
)
def test_forgeries_from_the_code_under_test_do_not_resolve(runner, name, forgery):
    inst = jsrepos.instance(name)
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": jsrepos.BUG + forgery})))
    assert run.resolved is False, (run.status, run.reason, run.outcomes)
    assert run.status == "tampered" or run.outcomes.get(f"{TEST}::signs > negative") != "passed"


def test_a_test_file_named_only_test_gets_a_canary_of_that_name_in_a_folder_of_its_own():
    """date-fns names every test `src/<fn>/test.ts` and its vitest config takes that name alone."""
    spec = EnvSpec(node="host", install="none", runner="vitest")
    argv, canaries = command("/usr/bin/node", spec, ["src/addDays/test.ts"])
    folder, name = canaries.path.rsplit("/", 1)
    assert name == "test.ts" and folder.startswith("src/addDays/c") and argv[-1] == canaries.path
    assert f"from '../../../{canaries.helper}'" in canaries.source


# The guard switched off from the code under test: each must come out tampered or failed.
GUARD_OFF = {
    # its exit listener gone (the run's end is never said), then node's assertions replaced
    "listeners": "process.removeAllListeners('exit');\nrequire('assert').strictEqual = function () {};\n",
    # every socket closed (the guard's descriptor among them), then Object.is replaced (toBe's)
    "sockets": "{ const fs = require('fs'); for (let fd = 3; fd < 1024; fd++) { try { if (fs.fstatSync(fd).isSocket()"
    " && fd !== (process.channel && process.channel.fd)) fs.closeSync(fd); } catch (e) {} } }\n"
    "Object.is = function () { return true; };\n",
}


@pytest.mark.parametrize("how", sorted(GUARD_OFF))
@pytest.mark.parametrize("name", JS_RUNNERS)
def test_switching_the_guard_off_is_a_finding_not_a_pass(runner, name, how):
    inst = jsrepos.instance(name)
    forged = GUARD_OFF[how] + jsrepos.BUG
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": forged})))
    assert run.resolved is False, (run.status, run.reason, run.outcomes)
    assert run.status == "tampered" or run.outcomes.get(f"{TEST}::signs > negative") != "passed"


@pytest.mark.parametrize(
    ("name", "forgery"),
    [
        # jest-circus's own record of the failure emptied after the test (its reporter trusts it)
        (
            "jest",
            "afterAll(() => { const s = globalThis[Object.getOwnPropertySymbols(globalThis).find((k) =>"
            " String(k) === 'Symbol(JEST_STATE_SYMBOL)')]; const walk = (b) => { for (const c of b.children)"
            " { if (c.errors) c.errors.length = 0; walk(c); } }; walk(s.rootDescribeBlock); });\n",
        ),
        # mocha's runner made to report a failure as a pass
        ("mocha", "require('mocha/lib/runner').prototype.fail = function (t) { this.emit('pass', t); };\n"),
    ],
)
def test_a_runner_state_rewritten_after_a_failure_is_tampered(runner, name, forgery):
    inst = jsrepos.instance(name)
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": forgery + jsrepos.BUG})))
    assert run.status == "tampered" and run.resolved is False, (run.status, run.reason, run.outcomes)


def test_vitests_result_rewritten_by_an_afterEach_of_the_code_under_test_is_tampered(runner):
    inst = jsrepos.instance("vitest")
    forged = (
        "import { afterEach } from 'vitest';\n"
        "afterEach((ctx) => { ctx.task.result.state = 'pass'; ctx.task.result.errors = []; });\n"
        "export function add(a, b) {\n  return a + Math.abs(b);\n}\n"
    )
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": forged})))
    assert run.status == "tampered" and run.resolved is False, (run.status, run.reason, run.outcomes)
    assert "lib/add.js registered a test hook (afterEach)" in str(run.reason)


def test_the_guards_secret_is_nowhere_the_code_under_test_can_read(runner, monkeypatch):
    """The code under test prints its environment, its argv, /proc's environ and cmdline of each
    process it can see, and the harness's files: the guard's secret is in none of them."""
    made: list[str] = []
    real = secrets.token_hex

    def recorded(n: int = 16) -> str:
        made.append(real(n))
        return made[-1]

    monkeypatch.setattr("reward.execution.runner.secrets.token_hex", recorded)
    dump = (
        "{ const fs = require('fs'); const seen = [JSON.stringify(process.env), process.argv.join(' ')];\n"
        "  for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) for (const f of ['environ', "
        "'cmdline']) { try { seen.push(fs.readFileSync(`/proc/${pid}/${f}`, 'latin1')); } catch (e) {} }\n"
        "  for (const f of fs.readdirSync('/swe-rl')) seen.push(fs.readFileSync('/swe-rl/' + f, 'latin1'));\n"
        "  const hex = new Set(seen.join(' ').match(/[0-9a-f]{32}/g) || []);\n"
        "  process.stdout.write('FOUND ' + [...hex].join(',') + '\\n'); }\n"
    )
    inst = jsrepos.instance("mocha")
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": dump + jsrepos.BUG})))
    secret = next(t for t in made if len(t) == 32)
    assert "FOUND" in run.log and secret not in run.log, run.log[-600:]
    assert run.status == "ok" and run.resolved is False, (run.status, run.reason)


def test_pid1_reads_the_guards_socket_as_ended_only_from_the_secrets_own_end():
    """inside.GuardReader: the secret waits on the command's end of the socket (at a number above
    63 drawn per run); an end line with it is "ended", a finding or a line without it is
    "tampered", nothing is "silent"."""

    def said(lines: list[bytes]) -> str:
        reader = GuardReader("ab" * 16)
        assert 64 <= reader.theirs < 1024
        assert os.read(reader.theirs, 64) == b"ab" * 16
        reader.start()
        for line in lines:
            os.write(reader.theirs, line + b"\n")
        os.close(reader.theirs)
        reader.join(timeout=5)
        return reader.result()

    secret = b"ab" * 16
    assert said([secret + b" end"]) == "ended"
    assert said([]) == "silent"
    assert said([secret + b" tampered Object.is was replaced", secret + b" end"]) == "tampered: Object.is was replaced"
    assert said([b"cd" * 16 + b" end"]).startswith("tampered: a line without the guard's secret")


def test_a_fix_whose_code_starts_and_stops_node_children_still_resolves(runner):
    """Children of a test process get a channel of their own: one that exits by itself says its
    end, one a test stops with process.kill (not its ChildProcess's kill) is left alone, and
    one started by spawnSync (no channel) reads nothing."""
    inst = jsrepos.instance("node-test")
    children = (
        "{ const cp = require('child_process');\n"
        "  cp.spawnSync(process.execPath, ['-e', '0']);\n"
        "  cp.spawn(process.execPath, ['-e', 'process.exit(0)'], { stdio: 'inherit' });\n"
        "  const server = cp.spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);\n"
        "  setTimeout(() => process.kill(server.pid, 'SIGTERM'), 200); }\n"
    )
    run = runner.run(TestJob(inst, make_patch({"lib/add.js": jsrepos.BUG}, {"lib/add.js": children + jsrepos.FIX})))
    assert run.status == "ok" and run.resolved is True, (run.status, run.reason, run.log[-800:])
