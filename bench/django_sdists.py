"""Django's test runner under the harness, on Django's release sdists.

    python bench/django_sdists.py [--lines 3.0,3.1,3.2,4.0,4.1,4.2,5.0] [--modules LABEL,...]

Django's history is too large to bring to these machines (about 637 MB), but every release
sdist on PyPI ships `tests/` with `runtests.py` and its settings. For each release line of
SWE-bench's django specs, this downloads the line's last release (cached under
.cache/sdists), makes it a one-commit git repository, and builds the environment SWE-bench's
spec for that version names (data.swebench_exec.environment: the interpreter, the
requirement file tests/requirements/py3.txt at that release, resolved as of the release's
date; the runner and its options, django's row in reward/execution/repos.py). Then, in the
sandbox, with django's runner under the harness's unittest recorder:

  (1) a small instance made on that release: a test patch adding two tests to
      tests/utils_tests/test_text.py (one named by its docstring, as SWE-bench's parser names
      such tests), a gold patch adding the function they call; FAIL_TO_PASS the two tests,
      PASS_TO_PASS the module's other tests as the base run reports them. The gold patch must
      resolve it, the empty patch must not;
  (2) the base commit's own tests of `--modules` (default: four modules of different kinds,
      no database, the ORM, forms, templates): how many passed, failed, errored, skipped.

Prints one table row per line; a line whose interpreter is not on this machine is counted as
`no_interpreter`, one whose environment fails to build as `env_failed` with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conf.config import ExecutionConfig  # noqa: E402
from data.schema import Instance  # noqa: E402
from data.swebench_exec import environment, spec_for  # noqa: E402
from reward.execution import repos  # noqa: E402
from reward.execution.environments import EnvSpec  # noqa: E402
from reward.execution.runner import Runner, TestJob, TestRun  # noqa: E402

# The last release of each line SWE-bench Lite and Verified use (their django rows are 3.0 to 5.0).
RELEASES = {
    "3.0": "3.0.14",
    "3.1": "3.1.14",
    "3.2": "3.2.25",
    "4.0": "4.0.10",
    "4.1": "4.1.13",
    "4.2": "4.2.16",
    "5.0": "5.0.9",
}
MODULES = ("utils_tests.test_text", "queries.test_q", "forms_tests.tests.test_forms", "template_tests.filter_tests")
REPO = "django/django"
TEST_FILE, CODE_FILE = "tests/utils_tests/test_text.py", "django/utils/text.py"
DOC = "A docstring names this test, as SWE-bench's log parser does."
NEW_TESTS = (
    "    def test_swe_rl_twice(self):\n"
    '        self.assertEqual(text.swe_rl_twice("ab"), "abab")\n\n'
    "    def test_swe_rl_named_by_doc(self):\n"
    f'        """{DOC}"""\n'
    '        self.assertEqual(text.swe_rl_twice("a"), "aa")\n\n'
)
ANCHOR = "class TestUtilsText(SimpleTestCase):\n"


def sdist_repo(version: str, cache: Path) -> tuple[Path, str, str]:
    """(repository, head commit, release date) of Django `version`'s sdist as a git repository."""
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / f"Django-{version}.tar.gz"
    if not archive.exists():
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*pip, "--dest", str(cache), f"Django=={version}"], check=True, timeout=600)
        found = [p for p in cache.glob(f"[Dd]jango-{version}.tar.gz") if p != archive]
        if found:
            found[0].rename(archive)
    with tarfile.open(archive) as tar:
        info = next(m for m in tar.getmembers() if m.name.endswith("/PKG-INFO") and m.name.count("/") == 1)
        date = datetime.fromtimestamp(info.mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        repo = cache / f"django-{version}"
        if (repo / ".git").exists() and not _dated(repo, date):  # made before its commit carried the release's date
            shutil.rmtree(repo)
        if not (repo / ".git").exists():
            repo.mkdir(exist_ok=True)
            tar.extractall(
                repo, filter=lambda m, _p: m.replace(name=m.name.split("/", 1)[-1]) if "/" in m.name else None
            )
            git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
            subprocess.run([*git, "init", "-q"], check=True)
            subprocess.run([*git, "add", "-A"], check=True)
            dated = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}  # what swebench_exec reads
            subprocess.run([*git, "commit", "-qm", f"Django {version} sdist"], check=True, env=dated)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    return repo, head.strip(), date


def _dated(repo: Path, date: str) -> bool:
    out = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%cI"], capture_output=True, text=True)
    return out.stdout.strip()[:10] == date[:10]


def diff_of(repo: Path, rel: str, new: str) -> str:
    """The unified diff that turns `rel` into `new` (made by git, the file restored)."""
    path = repo / rel
    old = path.read_text()
    path.write_text(new)
    try:
        return subprocess.run(["git", "-C", str(repo), "diff", "--", rel], capture_output=True, text=True).stdout
    finally:
        path.write_text(old)


def release_env(line: str, repo: Path, date: str) -> EnvSpec:
    """The environment SWE-bench's spec for django `line` names, read from the release."""
    import dataclasses

    specs = repos.swebench_specs()
    paths = specs[REPO].get("requirements_paths", [])

    def read(rel: str) -> str | None:
        path = repo / rel
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None

    env = environment(spec_for(specs, REPO, line), paths, read, date)
    runner, runner_args = repos.lookup(REPO).command_at(line)
    return dataclasses.replace(env, runner=runner, runner_args=runner_args)


def made_instance(repo: Path, head: str, env: EnvSpec) -> tuple[Instance, str]:
    """The small instance (1) without labels yet, and its gold patch."""
    test_patch = diff_of(repo, TEST_FILE, (repo / TEST_FILE).read_text().replace(ANCHOR, ANCHOR + NEW_TESTS, 1))
    gold = diff_of(
        repo, CODE_FILE, (repo / CODE_FILE).read_text() + "\n\ndef swe_rl_twice(value):\n    return value * 2\n"
    )
    inst = Instance("django__django-sdist", REPO, head, "", gold, test_patch, {}, {}, environment=env.to_json())
    return inst, gold


def labelled(inst: Instance, base: TestRun) -> Instance:
    """FAIL_TO_PASS: the two new tests; PASS_TO_PASS: the module's tests that pass at base."""
    import dataclasses

    new = [t for t in base.outcomes if "swe_rl_" in t or t == DOC]
    return dataclasses.replace(
        inst,
        fail_to_pass=tuple(sorted(new)),
        pass_to_pass=tuple(sorted(t for t, v in base.outcomes.items() if v == "passed" and t not in new)),
    )


def run_line(line: str, modules: tuple[str, ...], runner: Runner, cache: Path) -> dict[str, object]:
    version = RELEASES[line]
    repo, head, date = sdist_repo(version, cache)
    runner.snapshots.clones[REPO] = repo  # one clone per release: the runner reads it by repository name
    env = release_env(line, repo, date)
    row: dict[str, object] = {"line": line, "release": version, "python": env.python, "date": date[:10]}
    inst, gold = made_instance(repo, head, env)
    start = time.monotonic()
    base = runner.run(TestJob(inst, "", "base"))
    row["env_build_s"] = round(base.env_build_s, 1)
    if base.status != "ok":
        row.update(status=base.status, reason=(base.reason or "")[:300])
        return row
    inst = labelled(inst, base)
    row["fail_to_pass"], row["pass_to_pass"] = len(inst.fail_to_pass or ()), len(inst.pass_to_pass or ())
    row["doc_named"] = DOC in (inst.fail_to_pass or ())
    row["gold_resolved"] = runner.run(TestJob(inst, gold, "gold")).resolved
    row["empty_resolved"] = runner.run(TestJob(inst, "", "empty")).resolved
    suite = [f"tests/{m.replace('.', '/')}" for m in modules]
    files = [p + ".py" if (repo / (p + ".py")).is_file() else p + "/__init__.py" for p in suite]
    # the modules' own tests at the release: job.tests names test files the runner turns into labels
    own = runner.run(TestJob(inst, "", "suite", tests=tuple(files)))
    row["suite_status"] = own.status
    row["suite"] = dict(Counter(own.outcomes.values()))
    row["not_passed"] = {t: own.failures.get(t, v) for t, v in own.outcomes.items() if v in ("failed", "error")}
    row["seconds"] = round(time.monotonic() - start, 1)
    row["status"] = "ok"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", default=",".join(RELEASES), help="release lines (default: %(default)s)")
    parser.add_argument("--modules", default=",".join(MODULES), help="test labels run at base (2)")
    parser.add_argument("--cache", default=str(ROOT / ".cache" / "sdists"), help="sdists and their repositories")
    parser.add_argument("--execution-cache", default=str(ROOT / ".cache" / "execution"))
    args = parser.parse_args(argv)
    unknown = [line for line in args.lines.split(",") if line not in RELEASES]
    if unknown:
        parser.error(f"--lines: {unknown} not among the release lines {sorted(RELEASES)}")
    runner = Runner(ExecutionConfig(cache_dir=args.execution_cache, wall_s=900, cpu_s=900))
    for line in args.lines.split(","):
        row = run_line(line, tuple(args.modules.split(",")), runner, Path(args.cache))
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
