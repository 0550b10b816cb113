"""Deriving an environment by trying (derivation.py): each candidate built and baselined until
one runs the repository's tests, every attempt recorded; data.inject's record of it.

The decisions run on fakes; one small repository the test writes is built for real (a first
candidate whose requirement cannot install on its interpreter, a second that works: needs the
sandbox and PyPI, skipped otherwise), and flask's 3.1.0 release end to end where a clone of it
is beside the checkout (skipped otherwise: CI has none)."""

from __future__ import annotations

import functools
import json
import os
import urllib.request
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from data.fixtures.synthetic import RepoBuilder
from data.inject.__main__ import git_sources
from data.schema import Instance
from data.validate import derive_environments
from reward.execution import derivation, environments, pythons, sandbox
from reward.execution.derivation import Attempt, Deriver, reordered, select_tests, unusable, write_records
from reward.execution.runner import TestRun

ROOT = Path(__file__).resolve().parents[2]
FLASK = [
    ROOT.parent / "clones" / "flask",
    Path(os.environ.get("SWE_RL_MIRRORS", ROOT.parent / ".mirror")) / "pallets+flask" / "repo",
]


def test_a_baseline_counts_when_tests_ran_mostly_without_errors_and_one_passed():
    assert unusable({}) == "no test was collected"
    assert unusable({"passed": 1, "error": 3}).startswith("3 of 4 tests errored")
    assert unusable({"failed": 4, "skipped": 1}).startswith("no test passes")
    assert unusable({"failed": 4}, need_passing=False) is None  # an instance's tests before its fix
    assert unusable({"passed": 2, "failed": 1, "error": 1}) is None


def test_the_tests_run_are_those_under_the_repositorys_own_selection():
    tests = ("tests/test_a.py", "tests/unit/test_b.py", "scripts/test_c.py")
    assert select_tests(tests, ("tests/unit",)) == ("tests/unit/test_b.py",)
    assert select_tests(tests, ("tests", "scripts/test_c.py")) == tests
    assert select_tests(tests, ()) == tests
    assert select_tests(tests, ("docs",)) == tests  # a selection that has none of them selects nothing


def test_after_a_missing_module_the_next_set_comes_before_the_next_interpreter():
    spec = environments.EnvSpec()
    pending = [("tox:testenv", spec), ("poetry:dev", spec), ("none", spec)]
    missing = Attempt("3.12", "tox:testenv", "baseline", "1 of 1 tests errored\ntests/t.py: ModuleNotFoundError: attr")
    assert [n for n, _ in reordered(pending, missing)] == ["poetry:dev", "none", "tox:testenv"]
    built = Attempt("3.12", "tox:testenv", "build", "env_failed: No solution found")
    assert reordered(pending, built) == pending


def test_an_instance_with_no_test_to_run_is_tried_once(tmp_path, monkeypatch):
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.9", "3.10", "3.11"))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry])
    deriver = Deriver(cfg)
    deriver.runner.run = lambda job: TestRun(job.job_id, "x", "no_tests", reason="the instance has no test patch")  # type: ignore[method-assign]
    git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    (derived,) = deriver.derivations
    assert [a.error for a in derived.attempts] == ["no_tests: the instance has no test patch"]


def test_an_attempts_error_keeps_what_failed_and_how_it_ended():
    trace = "\n".join(
        ["env_failed: build the snapshot failed:", *(f"  frame {i}" for i in range(20)), "LookupError: no version"]
    )
    kept = derivation._lines(trace).splitlines()
    assert kept[0] == "env_failed: build the snapshot failed:" and kept[1] == "..."
    assert kept[-1] == "LookupError: no version" and len(kept) == derivation._ERROR_LINES
    assert derivation._lines("x" * 2000) == "x" * derivation._ERROR_CHARS


def test_after_the_snapshots_own_build_failed_the_next_interpreter_comes_first():
    on = lambda version: environments.EnvSpec(python=version)  # noqa: E731
    pending = [("none", on("3.7")), ("tox:testenv", on("3.8")), ("none", on("3.8"))]
    failed = Attempt("3.7", "tox:testenv", "build", f"env_failed: {environments.SNAPSHOT_BUILD} failed:\n  LookupError")
    assert [(n, s.python) for n, s in reordered(pending, failed)] == [
        ("tox:testenv", "3.8"),
        ("none", "3.8"),
        ("none", "3.7"),
    ]


def test_candidates_that_fail_to_build_do_not_use_up_the_baselines(tmp_path, monkeypatch):
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.9", "3.10", "3.11"))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry])
    deriver = Deriver(cfg, limit=1)
    runs = iter(
        [TestRun("j", "x", "env_failed", reason="resolution failed"), TestRun("j", "x", "ok", {"t::a": "passed"})]
    )
    deriver.runner.run = lambda job: next(runs)  # type: ignore[method-assign]
    git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    (derived,) = deriver.derivations
    assert derived.ok and [a.stage for a in derived.attempts] == ["build", "ok"]


def _widget(path: Path, extra: dict[str, str] | None = None) -> RepoBuilder:
    """A src-layout project whose pip-compiled test requirements were resolved with Python 3.12,
    one of them installable on 3.11 only (its marker), with a tox test command that deselects
    its slow tests and pytest's testpaths that leave scripts/ out."""
    repo = RepoBuilder(path, origin_url="https://github.com/acme/widget.git")
    header = "#\n# This file is autogenerated by pip-compile with Python 3.12\n#\n"
    files = {
        "pyproject.toml": '[build-system]\nrequires = ["flit_core>=3.2,<4"]\nbuild-backend = "flit_core.buildapi"\n\n'
        '[project]\nname = "widget"\nversion = "0.1.0"\ndescription = "w"\nrequires-python = ">=3.10"\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\nmarkers = ["slow"]\n',
        "requirements/tests.txt": header + "pytest==7.4.3\n"
        'swe-rl-no-such-package-xyz==1.0 ; python_version >= "3.12"\n',
        "tox.ini": '[testenv]\ndeps = -r requirements/tests.txt\ncommands = pytest -m "not slow" {posargs}\n',
        "src/widget/__init__.py": "def double(x):\n    return 2 * x\n",
        "tests/test_widget.py": "import subprocess, sys\nimport pytest\nfrom widget import double\n\n\n"
        "def test_double():\n    assert double(2) == 4\n\n\n"
        "def test_a_subprocess_with_its_own_path_imports_it():  # as werkzeug's dev server does\n"
        "    code = 'import widget; print(widget.double(3))'\n"
        "    out = subprocess.run([sys.executable, '-c', code], env={'PYTHONPATH': '/nowhere'}, capture_output=True)\n"
        "    assert out.stdout == b'6\\n', out.stderr\n\n\n"
        "@pytest.mark.slow\ndef test_slow():\n    assert False\n",
        "scripts/test_scratch.py": "def test_scratch():\n    assert False\n",
        **(extra or {}),
    }
    repo.commit(files, "Initial commit")
    return repo


class FakeRunner:
    """Fails the build on 3.12 (as uv would on the marker's package), passes one test on 3.11."""

    def __init__(self) -> None:
        self.jobs: list = []

    def run(self, job):
        self.jobs.append(job)
        spec = environments.EnvSpec.from_json(job.instance.environment)
        if spec.python == "3.12":
            return TestRun(job.job_id, "x", "env_failed", reason="uv pip install failed:\n  No solution found\nmore")
        return TestRun(job.job_id, "x", "ok", {"tests/test_widget.py::test_double": "passed"}, env_build_s=2.0)


def test_a_failing_first_candidate_is_recorded_and_the_second_chosen(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.10", "3.11", "3.12"))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry])
    deriver = Deriver(cfg)
    deriver.runner = FakeRunner()  # type: ignore[assignment]
    (source,) = git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    assert source.tests == ("tests/test_widget.py",)  # testpaths: scripts/ left out
    (derived,) = deriver.derivations
    assert [(a.python, a.requirements, a.stage) for a in derived.attempts] == [
        ("3.12", "tox:testenv", "build"),
        ("3.11", "tox:testenv", "ok"),
    ]
    assert derived.attempts[0].error == "env_failed: uv pip install failed:\n  No solution found\nmore"
    assert environments.EnvSpec.from_json(source.instance.environment) == derived.spec
    assert derived.spec.python == "3.11" and derived.spec.runner_args == ("-m", "not slow")
    assert (
        capsys.readouterr()
        .out.strip()
        .startswith(
            "[env] acme/widget@"
            + source.instance.base_commit[:10]
            + ": ok, python 3.11, tox:testenv; baseline 1 passed"
        )
    )
    write_records(tmp_path, deriver.derivations)
    (record,) = json.loads((tmp_path / derivation.RECORDS).read_text())
    assert record["python"] == "3.11" and record["baseline"] == {"passed": 1}
    assert [a["stage"] for a in record["attempts"]] == ["build", "ok"] and record["seconds"]["build"] == 2.0
    assert record["command"]["paths"] == ["tests"] and record["tests"] == 1


def test_when_no_candidate_counts_the_one_with_most_passing_tests_is_kept_and_marked_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.10", "3.11"))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry])
    deriver = Deriver(cfg, limit=2)
    outcomes = iter([{"t::a": "failed"}, {"t::a": "error"}])
    failures = {"t::a": "E   AssertionError"}
    deriver.runner.run = lambda job: TestRun(job.job_id, "x", "ok", next(outcomes), failures=failures)  # type: ignore[method-assign]
    git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    (derived,) = deriver.derivations
    assert not derived.ok and derived.spec.python == "3.11"  # the first, at equal passing counts
    assert [a.error for a in derived.attempts] == [
        "no test passes (1 failed, 0 errored)\nt::a: E   AssertionError",
        "1 of 1 tests errored (collection or fixtures)\nt::a: E   AssertionError",
    ]
    assert "FAILED" in derived.summary() and derived.summary().endswith(
        "last: baseline: 1 of 1 tests errored (collection or fixtures)"
    )


@functools.cache
def _no_pypi() -> str | None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/pytest/", timeout=5).close()
    except OSError as exc:
        return f"PyPI is not reachable: {exc}"
    return None


def _installed(*versions: str) -> str | None:
    missing = [v for v in versions if v not in pythons.installed()]
    return f"Python {', '.join(missing)} not installed" if missing else None


@pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")
@pytest.mark.skipif(_no_pypi() is not None, reason=str(_no_pypi()))
@pytest.mark.skipif(_installed("3.11", "3.12") is not None, reason=str(_installed("3.11", "3.12")))
def test_a_real_build_falls_back_to_the_interpreter_where_the_requirement_installs(tmp_path, monkeypatch):
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.11", "3.12"))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry], wall_s=120.0)
    deriver = Deriver(cfg)
    (source,) = git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    first, second = deriver.derivations[0].attempts
    assert (first.python, first.stage) == ("3.12", "build") and "swe-rl-no-such-package-xyz" in first.error
    # The slow test deselected by the tox command, scripts/ outside testpaths; the subprocess
    # imports the snapshot (environments.IMPORT_PATH).
    assert (second.python, second.stage, second.counts) == ("3.11", "ok", {"passed": 2})
    assert environments.EnvSpec.from_json(source.instance.environment).python == "3.11"


@pytest.mark.skipif(
    not any((p / "HEAD").exists() or (p / ".git").exists() for p in FLASK),
    reason="no clone of pallets/flask beside the checkout",
)
@pytest.mark.skipif(sandbox.available() is not None, reason=f"no sandbox: {sandbox.available()}")
@pytest.mark.skipif(_no_pypi() is not None, reason=str(_no_pypi()))
@pytest.mark.skipif(_installed("3.13") is not None, reason=str(_installed("3.13")))
def test_flask_3_1_0_builds_on_the_python_its_requirements_were_compiled_with_and_baselines(tmp_path):
    clone = next(p for p in FLASK if (p / "HEAD").exists() or (p / ".git").exists())
    entry = f"pallets/flask={clone}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry], wall_s=300.0)
    deriver = Deriver(cfg)
    git_sources([entry], "3.1.0", (), cfg, "derive", deriver)
    (derived,) = deriver.derivations
    assert derived.ok and derived.spec.python == "3.13" and derived.requirements == "tox:testenv"
    (attempt,) = derived.attempts  # the first candidate works
    assert attempt.counts["passed"] > 450 and not attempt.counts.get("failed") and not attempt.counts.get("error")


def test_data_validate_derives_each_instance_on_its_own_tests_which_may_all_fail_before_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.11", "3.12"))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry])
    test_patch = (
        "--- a/tests/test_new.py\n+++ b/tests/test_new.py\n@@ -0,0 +1,2 @@\n+def test_new():\n+    assert False\n"
    )
    inst = Instance("acme__widget-1", "acme/widget", repo.git("rev-parse", "HEAD"), "", "", test_patch, {}, {})
    deriver = Deriver(cfg, need_passing=False)
    jobs: list = []

    def run(job):
        jobs.append(job)
        return TestRun(job.job_id, "x", "ok", {"tests/test_new.py::test_new": "failed"})

    deriver.runner.run = run  # type: ignore[method-assign]
    (derived,) = derive_environments([inst], cfg, deriver)
    assert len(jobs) == 1 and jobs[0].tests == () and jobs[0].patch == ""  # its test patch, not the fix
    assert derived.environment == deriver.derivations[0].spec.to_json() and deriver.derivations[0].ok


def test_the_repositorys_command_ignores_are_applied_to_the_files_the_harness_names():
    tests = ("tests/test_a.py", "tests/integration/test_b.py", "tests/test_c_live.py")
    args = ("-m", "not slow", "--ignore=tests/integration", "--ignore-glob=*_live.py")
    assert select_tests(tests, ("tests",), args) == ("tests/test_a.py",)


def test_a_baseline_out_of_its_wall_runs_once_more_with_it_doubled(tmp_path, monkeypatch):
    """The machine's load is not the suite's: a timeout is retried at twice the wall, and the
    chosen baseline's own seconds are what the later runs' walls follow (data.inject)."""
    monkeypatch.setattr(environments, "installed_for", lambda when, days=0: ("3.11",))
    repo = _widget(tmp_path / "widget")
    entry = f"acme/widget={repo.path}"
    cfg = ExecutionConfig(cache_dir=str(tmp_path / "cache"), repos=[entry], wall_s=30.0)
    deriver = Deriver(cfg)
    walls_seen: list = []

    def run(job):
        walls_seen.append(job.wall(cfg.wall_s))
        if job.wall(cfg.wall_s) < 40:
            return TestRun(job.job_id, "x", "timeout", reason="the test run was stopped: timeout", wall_s=30.0)
        return TestRun(
            job.job_id, "x", "ok", {"tests/test_widget.py::test_double": "passed"}, seconds=35.0, wall_s=60.0
        )

    deriver.runner.run = run  # type: ignore[method-assign]
    (source,) = git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    (derived,) = deriver.derivations
    assert walls_seen == [30.0, 60.0] and derived.ok
    (attempt,) = derived.attempts
    assert (attempt.stage, attempt.run_s, attempt.wall_s) == ("ok", 35.0, 60.0)
    assert derived.baseline_s == 35.0 and source.baseline_s == 35.0
    # Twice out of its wall: a timeout, and no other candidate is tried (each would cost as much).
    deriver = Deriver(cfg)
    deriver.runner.run = lambda job: TestRun(job.job_id, "x", "timeout", reason="stopped", wall_s=job.wall(30.0))  # type: ignore[method-assign]
    git_sources([entry], "HEAD", (), cfg, "derive", deriver)
    (attempt,) = deriver.derivations[0].attempts
    assert attempt.error.startswith("timeout") and attempt.wall_s == 60.0 and deriver.derivations[0].baseline_s is None
