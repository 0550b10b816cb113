"""python -m data.inject with a clone (data/bugs/repository.py): bugs injected into a repository at a
commit, with no pull request: the bug is a commit of the clone, the instance's tests are the
files its labels name, and the instance resolves with its oracle patch and not without."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from data.bugs.proof import inject
from data.bugs.repository import REF_PREFIX, read_source
from data.fixtures.synthetic import RepoBuilder
from data.git.commits import commit_files
from data.loader import read_instances
from data.schema import Instance
from reward.execution import sandbox
from reward.execution.derivation import unusable
from reward.execution.runner import Runner, TestJob, TestRun, labelled_files, rooted

REPO = Path(__file__).resolve().parents[2]
needs_sandbox = pytest.mark.skipif(
    sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}"
)

CALC = '''"""Small arithmetic."""


def add(a, b):
    return a + b


def clamp(x, low, high):
    if x < low:
        return low
    if x > high:
        return high
    return x


def mean(values):
    return sum(values) / len(values)
'''
TESTS = """from calc.ops import add, clamp, mean


def test_add():
    assert add(2, 3) == 5


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2


def test_mean():
    assert mean([1, 2, 3]) == 2
"""


def _repo(root: Path) -> RepoBuilder:
    repo = RepoBuilder(root, origin_url="https://github.com/acme/calc.git")
    repo.commit(
        {
            "calc/__init__.py": "",
            "calc/ops.py": CALC,
            "tests/__init__.py": "",
            "tests/helpers.py": "ANSWER = 42\n",
            "tests/test_ops.py": TESTS,
            "docs/conf.py": "project = 'calc'\n",
        },
        "calc",
    )
    return repo


def test_commit_files_is_reproducible_and_leaves_the_parent_alone(tmp_path):
    repo = _repo(tmp_path / "r")
    head = repo.git("rev-parse", "HEAD")
    changes = {"calc/ops.py": CALC.replace("a + b", "a - b"), "docs/conf.py": None}
    a = commit_files(repo.path, head, changes, "bug", REF_PREFIX + "x")
    b = commit_files(repo.path, head, changes, "bug", REF_PREFIX + "y")
    assert a == b and repo.git("rev-parse", REF_PREFIX + "x") == a
    assert "a - b" in repo.git("show", f"{a}:calc/ops.py") and "a + b" in repo.git("show", f"{head}:calc/ops.py")
    assert "docs/conf.py" not in repo.git("ls-tree", "-r", "--name-only", a)
    assert repo.git("rev-parse", "HEAD") == head and repo.git("status", "--porcelain") == ""


def test_read_source_takes_the_code_and_lists_the_tests(tmp_path):
    repo = _repo(tmp_path / "r")
    src = read_source("acme/calc", repo.path, "HEAD")
    assert sorted(src.instance.code_context) == ["calc/__init__.py", "calc/ops.py"]  # no tests/, no docs/
    assert src.tests == ("tests/test_ops.py",) and src.instance.base_commit == repo.git("rev-parse", "HEAD")
    with pytest.raises(ValueError, match="no commit"):
        read_source("acme/calc", repo.path, "nope")
    with pytest.raises(ValueError, match="no Python source"):
        read_source("acme/calc", repo.path, "HEAD", ("src",))
    # nose's naming (tqdm until 2020: tqdm/tests/tests_*.py), found when no test_*.py is there
    repo.commit({"tests/test_ops.py": None, "tests/tests_ops.py": TESTS}, "nose")
    assert read_source("acme/calc", repo.path, "HEAD").tests == ("tests/tests_ops.py",)
    # the repository's own python_files wins over both
    repo.commit({"setup.cfg": "[tool:pytest]\npython_files = check_*.py\n", "tests/check_ops.py": TESTS}, "own")
    assert read_source("acme/calc", repo.path, "HEAD").tests == ("tests/check_ops.py",)


def test_read_source_takes_a_javascript_repository_s_code_and_tests(tmp_path):
    repo = RepoBuilder(tmp_path / "js", origin_url="https://github.com/acme/calc-js.git")
    repo.commit(
        {
            "package.json": '{"name": "calc", "scripts": {"test": "mocha"}}\n',
            "index.js": "module.exports = require('./lib/calc');\n",
            "lib/calc.js": "exports.add = (a, b) => a + b;\n",
            "lib/types.d.ts": "export declare function add(a: number, b: number): number;\n",
            "test/calc.js": "const assert = require('assert');\n",
            "test/support/env.js": "process.env.TZ = 'UTC';\n",
            "src/__tests__/more.test.ts": "test('x', () => {});\n",
            "tools/gen.py": "print(1)\n",
            "eslint.config.js": "module.exports = [];\n",
        },
        "calc",
    )
    src = read_source("acme/calc-js", repo.path, "HEAD")
    assert src.tests == ("src/__tests__/more.test.ts", "test/calc.js")
    assert sorted(src.instance.code_context) == ["index.js", "lib/calc.js"]
    # A Python repository with a few JavaScript tests beside its own stays a Python one.
    py = _repo(tmp_path / "py")
    py.commit({"calc/static/app.js": "let a = 1;\n", "calc/static/app.test.js": "test('a', () => {});\n"}, "js")
    src = read_source("acme/calc", py.path, "HEAD")
    assert src.tests == ("tests/test_ops.py",)
    assert sorted(src.instance.code_context) == ["calc/__init__.py", "calc/ops.py"]


# Code no test executes: many mutation sites, none a test can see.
UNUSED = "".join(
    f"def unused_{k}(x, y):\n    if x > y:\n        return x - {k}\n    return y + {k}\n\n\n" for k in range(12)
)


class CoveringPool:
    """Every test passes; a run asked for coverage reports `covered` (what bootstrap.py measures
    in the sandbox); `asked` keeps each job's (id, coverage) flag."""

    def __init__(self, tests: list[str], covered: dict[str, frozenset[int]]) -> None:
        self.tests, self.covered, self.asked = tests, covered, []

    def run(self, jobs, what=""):
        self.asked += [(job.job_id, job.coverage) for job in jobs]
        outcomes = dict.fromkeys(self.tests, "passed")
        return [
            TestRun(job.job_id, job.instance.instance_id, "ok", outcomes, covered=self.covered if job.coverage else {})
            for job in jobs
        ]


def test_rules_bugs_are_drawn_on_the_lines_the_baselines_tests_executed(tmp_path):
    repo = _repo(tmp_path / "r")
    repo.commit({"calc/unused.py": UNUSED}, "code no test runs")
    source = read_source("acme/calc", repo.path, "HEAD")
    ops = frozenset(range(4, 18))  # calc/ops.py's function bodies: what the tests run
    pool = CoveringPool(["tests/test_ops.py::test_add"], {"calc/ops.py": ops, "tests/test_ops.py": frozenset({1})})
    baselines: dict = {}
    outcomes = inject([source], pool, per_instance=6, seed=0, baselines_out=baselines)
    drawn = [m for o in outcomes if o.candidate for m in o.candidate.bug]
    assert len(drawn) == 6 and {(m.path, m.line in ops) for m in drawn} == {("calc/ops.py", True)}
    # Only the first baseline run measures (it is slower); bug runs never do.
    assert [a for a in pool.asked if a[1]] == [("0/base/0", True)]
    assert baselines[source.instance.instance_id]["covered_lines"] == len(ops) + 1
    # Nothing measured (an interpreter coverage.py does not support): every site may be drawn.
    unmeasured = inject([source], CoveringPool(["t"], {}), per_instance=6, seed=0)
    assert {m.path for o in unmeasured if o.candidate for m in o.candidate.bug} == {"calc/ops.py", "calc/unused.py"}
    # --sites all: no run measures, any line is drawn (as before the coverage run).
    anywhere = CoveringPool(["t"], {"calc/ops.py": ops})
    drawn_all = inject([source], anywhere, per_instance=6, seed=0, sites="all")
    assert not any(flag for _, flag in anywhere.asked)
    assert {m.path for o in drawn_all if o.candidate for m in o.candidate.bug} == {"calc/ops.py", "calc/unused.py"}


def test_an_instance_without_a_test_patch_runs_the_files_its_labels_name():
    inst = Instance(
        "i",
        "a/b",
        "c",
        "",
        "",
        "",
        {},
        {},
        fail_to_pass=("tests/test_a.py::test_x",),
        pass_to_pass=("tests/sub/test_b.py::T::test_y", "odd id"),
    )
    assert labelled_files(inst) == ["tests/sub/test_b.py", "tests/test_a.py"]


def test_labels_relative_to_a_tests_folders_own_pytest_ini_name_files_under_it(tmp_path):
    # rich's tests/pytest.ini makes tests/ pytest's rootdir: its ids read test_align.py::...
    (tmp_path / "tests").mkdir()
    for name in ("tests/pytest.ini", "tests/test_align.py", "test_root.py"):
        (tmp_path / name).write_text("")
    found = rooted(tmp_path, ["test_align.py", "test_root.py", "test_gone.py"])
    assert found == ["tests/test_align.py", "test_root.py", "test_gone.py"]


@pytest.fixture(scope="module")
def injected(tmp_path_factory):
    root = tmp_path_factory.mktemp("inject-git")
    repo = _repo(root / "calc")
    out, cache = root / "out", root / "cache"
    cmd = [sys.executable, "-m", "data.inject", f"reward.execution.repos=['acme/calc={repo.path}']", "--out", str(out)]
    cmd += ["--per-repo", "4", "reward.execution.num_runners=0", "reward.execution.wall_s=30"]
    cmd += [f"reward.execution.cache_dir={cache}"]
    cmd += ["--environment", "{}", "--operators", "binop,compare,drop_return"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return repo, out, cache, json.loads((out / "_manifest.json").read_text())


@needs_sandbox
def test_bugs_in_a_repository_at_a_commit_become_instances_that_resolve(injected):
    repo, out, cache, manifest = injected
    head = repo.git("rev-parse", "HEAD")
    assert manifest["commit"] == {"acme/calc": head} and manifest["candidates"] == 4
    (baseline,) = manifest["baselines"].values()
    assert (baseline["passing"], baseline["left_out"]) == (3, 0)
    if (cache / "tools" / "coverage-host").is_dir():  # uv installed coverage.py (it needs the index once)
        assert baseline["covered_lines"] >= 11  # calc/ops.py's 11 lines the tests run, measured in the sandbox
    else:  # no index here: the run went on unmeasured and the draw took every line
        assert baseline["covered_lines"] == 0
    kept = list(read_instances(str(out), 0))
    assert kept and len(kept) == manifest["kept"]
    runner = Runner(ExecutionConfig(cache_dir=str(cache), wall_s=10.0, repos=[f"acme/calc={repo.path}"]))
    for inst in kept:
        assert inst.test_patch == "" and inst.fail_to_pass and inst.repo == "acme/calc"
        assert repo.git("rev-parse", f"{inst.base_commit}^") == head  # the bug is a commit on the source
        assert repo.git("rev-parse", REF_PREFIX + inst.instance_id) == inst.base_commit
        assert list(inst.oracle_new_content) == ["calc/ops.py"] and inst.oracle_new_content["calc/ops.py"] == CALC
        assert inst.code_context["calc/ops.py"].strip() == repo.git("show", f"{inst.base_commit}:calc/ops.py")
        assert inst.code_context["calc/ops.py"] != CALC
        gold, empty = runner.run(TestJob(inst, inst.patch)), runner.run(TestJob(inst, ""))
        assert (gold.status, gold.resolved) == ("ok", True), gold.reason
        assert (empty.status, empty.resolved) == ("ok", False)
    # A candidate may not reach the verdict through a helper beside the tests.
    inst = kept[0]
    forged = "--- a/tests/helpers.py\n+++ b/tests/helpers.py\n@@ -1 +1 @@\n-ANSWER = 42\n+ANSWER = 43\n"
    run = runner.run(TestJob(inst, inst.patch + forged))
    assert run.guarded == ("tests/helpers.py",) and run.resolved is True


TYPE_CASE = "from calc.ops import add\n\nreveal_type(add(1, 2))  # mypy: Revealed type is 'Any'\n"


def _typed_repo(root: Path) -> RepoBuilder:
    """calc with a folder of mypy cases named test_*.py (NameError at import), a folder its
    pytest configuration does not recurse into and one its addopts ignores, all failing."""
    repo = _repo(root)
    broken = "def test_broken():\n    assert False\n"
    repo.commit(
        {
            "tests/typing/test_ops_types.py": TYPE_CASE,
            "tests/typing/test_more_types.py": TYPE_CASE,
            "tests/fixtures/test_sample.py": broken,
            "tests/manual/test_by_hand.py": broken,
            "setup.cfg": "[tool:pytest]\nnorecursedirs = fixtures .*\naddopts = --ignore=tests/manual\n",
        },
        "type-checker cases and folders pytest leaves out",
    )
    return repo


def test_read_source_leaves_out_type_checker_cases_and_what_pytests_configuration_excludes(tmp_path):
    src = read_source("acme/calc", _typed_repo(tmp_path / "r").path, "HEAD")
    assert src.tests == ("tests/test_ops.py",)


@needs_sandbox
def test_a_baseline_of_a_repository_with_type_checker_cases_passes_once_they_are_left_out(tmp_path):
    """Named on pytest's command line, the cases error at collection and stop the session (the
    derivation's `unusable`: no candidate counts); the source's tests run clean."""
    repo = _typed_repo(tmp_path / "r")
    src = read_source("acme/calc", repo.path, "HEAD")
    inst = replace(src.instance, environment='{"snapshot": "git"}')
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path / "cache"), wall_s=60.0, repos=[f"acme/calc={repo.path}"]))
    every = ["tests/test_ops.py", "tests/typing/test_ops_types.py", "tests/typing/test_more_types.py"]
    every += ["tests/fixtures/test_sample.py", "tests/manual/test_by_hand.py"]
    before = runner.run(TestJob(inst, "", tests=tuple(every)))
    # pytest stops at collection errors: the cases' NameError is the whole baseline
    assert before.status == "ok" and before.outcomes == dict.fromkeys(every[1:3], "error")
    assert "reveal_type" in before.failures[every[1]]
    assert unusable(dict(Counter(before.outcomes.values()))) == "2 of 2 tests errored (collection or fixtures)"
    after = runner.run(TestJob(inst, "", tests=src.tests))
    assert after.status == "ok" and set(after.outcomes.values()) == {"passed"} and len(after.outcomes) == 3
