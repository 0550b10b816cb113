"""The embedded demo set (data/demo/__init__.py, data/demo/): the committed Parquet file matches its
sources, every instance is well formed and small, its oracle patch turns code_context into
oracle_new_content exactly (under the project's strict applier and under `git apply`), and
its tests fail before the fix and pass after it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data import demo
from data.demo import __main__ as make
from data.patching import apply_patch, unified_diff
from data.schema import FIELD_NAMES, INSTANCE_SCHEMA, files_to_dict, validate_instance

ROWS = demo.load_demo_rows()
IDS = [row["instance_id"] for row in ROWS]
ROOT = Path(__file__).resolve().parents[2]
# Issue + code of one instance; 6,000 characters is about 1.7k SmolLM2 tokens (the largest
# instance today has 5k characters, 1.6k tokens), well inside data.max_prompt_tokens.
MAX_PROMPT_CHARS = 6000
MAX_LINES_PER_SIDE = 15


def _write_tree(root: Path, files: Mapping[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _trees(row: Mapping) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(repository before the fix, after it, the test files) of one instance."""
    context = files_to_dict(row["code_context"])
    new = files_to_dict(row["oracle_new_content"])
    before = {p: t for p, t in context.items() if t}  # "" = a file the fix creates
    after = {p: t for p, t in (context | new).items() if t}  # "" = a file the fix deletes
    return before, after, apply_patch({}, row["test_patch"])


# ------------------------------------------------------------------ the set as a whole


def test_committed_parquet_matches_the_sources():
    fresh = make.build_table()
    committed = pq.read_table(demo.demo_parquet_path())
    # Parquet renames list items ("item" -> "element"), so compare names, metadata and a cast.
    assert committed.schema.names == INSTANCE_SCHEMA.names
    assert committed.schema.metadata == INSTANCE_SCHEMA.metadata, "schema version changed: run `python -m data.demo`"
    assert committed.cast(INSTANCE_SCHEMA).schema.equals(INSTANCE_SCHEMA)
    fresh_rows = fresh.to_pylist()
    assert [r["instance_id"] for r in fresh_rows] == IDS, "instances added or removed: run `python -m data.demo`"
    for old, new in zip(ROWS, fresh_rows):
        for field in FIELD_NAMES:
            assert old[field] == new[field], (
                f"{old['instance_id']}.{field} differs from data/demo/src: run `python -m data.demo`"
            )


def test_rebuild_is_byte_identical(tmp_path):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    make.write_parquet(make.build_table(), first)
    make.write_parquet(make.build_table(), second)
    assert first.read_bytes() == second.read_bytes()


def test_set_size_and_spread():
    assert len(ROWS) >= 12
    assert len(set(IDS)) == len(IDS)
    modules = {(row["repo"], f["path"]) for row in ROWS for f in row["oracle_new_content"]}
    assert len(modules) >= 6
    assert len({row["repo"] for row in ROWS}) >= 6
    assert sum(len(row["oracle_new_content"]) == 2 for row in ROWS) >= 2


def test_load_demo_rows_gives_plain_dicts():
    row = ROWS[0]
    assert set(row) == set(FIELD_NAMES)
    assert isinstance(row["code_context"][0], dict) and set(row["code_context"][0]) == {"path", "content"}


# ------------------------------------------------------------------ each instance


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_instance_is_well_formed(row):
    validate_instance(row, where=row["instance_id"])
    name, number = make.parse_instance_id(row["instance_id"])
    assert (row["repo"], row["pr_number"], row["problem_source"]) == (f"swe-rl-demo/{name}", number, "issue")
    assert re.fullmatch(r"[0-9a-f]{40}", row["base_commit"])
    title, blank, body = row["problem_statement"].partition("\n\n")
    assert title and "\n" not in title and len(body) > 200, "issue.md: a title line, a blank line, a report"
    changed = [f["path"] for f in row["oracle_new_content"]]
    assert [f["path"] for f in row["code_context"]][: len(changed)] == changed, "changed files come first"
    prompt_chars = len(row["problem_statement"]) + sum(len(f["content"]) for f in row["code_context"])
    assert prompt_chars <= MAX_PROMPT_CHARS


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_patch_reproduces_oracle_new_content(row):
    check_patch_reproduces(row)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_patches_apply_with_git(tmp_path):
    check_git_applies(ROWS, tmp_path)


def check_patch_reproduces(row: Mapping) -> None:
    """The patch gives oracle_new_content exactly, a small change (this set's and demo-js's)."""
    # The strict applier that checks every mined instance (data/patching.py).
    patched = apply_patch(files_to_dict(row["code_context"]), row["patch"])
    assert patched == files_to_dict(row["oracle_new_content"])
    body = [line for line in row["patch"].splitlines() if not line.startswith(("+++", "---"))]
    added = sum(line.startswith("+") for line in body)
    removed = sum(line.startswith("-") for line in body)
    assert max(added, removed) >= 1 and added <= MAX_LINES_PER_SIDE and removed <= MAX_LINES_PER_SIDE


def check_git_applies(rows: list, tmp_path: Path) -> None:
    """`git apply` of each row's patch and test patch gives after/ and the tests exactly."""
    for row in rows:
        before, after, tests = _trees(row)
        work = tmp_path / row["instance_id"]
        _write_tree(work, before)
        for field in ("patch", "test_patch"):
            (work / f"{field}.diff").write_text(row[field], encoding="utf-8")
            proc = subprocess.run(["git", "apply", f"{field}.diff"], cwd=work, capture_output=True, text=True)
            assert proc.returncode == 0, f"{row['instance_id']}: git apply {field}: {proc.stderr}"
            (work / f"{field}.diff").unlink()
        written = {
            p.relative_to(work).as_posix(): p.read_text(encoding="utf-8") for p in work.rglob("*") if p.is_file()
        }
        assert written == after | tests, row["instance_id"]


def _run_pytest(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    # Plugins of the project's venv cost ~1 s a start and play no part in these small tests.
    env |= {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def demo_test_runs(tmp_path_factory) -> dict[tuple[str, str], tuple[int, str]]:
    """Every instance's tests run on its before and after trees: {(id, state): (rc, output)}."""
    jobs = {}
    for row in ROWS:
        before, after, tests = _trees(row)
        for state, files in (("before", before), ("after", after)):
            root = tmp_path_factory.mktemp(f"{row['instance_id']}-{state}")
            _write_tree(root, files | tests)
            jobs[row["instance_id"], state] = root
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = pool.map(_run_pytest, jobs.values())
        return {key: (r.returncode, (r.stdout + r.stderr)[-3000:]) for key, r in zip(jobs, results)}


@pytest.mark.parametrize("instance_id", IDS)
def test_tests_fail_before_and_pass_after_the_fix(demo_test_runs, instance_id):
    (rc_before, out_before), (rc_after, out_after) = (demo_test_runs[instance_id, s] for s in ("before", "after"))
    # 1 = tests ran and some failed (2 would be a collection error, 5 no tests at all).
    assert rc_before == 1, f"before the fix:\n{out_before}"
    assert rc_after == 0, f"after the fix:\n{out_after}"


def test_pytest_from_the_repository_root_skips_the_demo_sources():
    env = os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "data"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 5, proc.stdout + proc.stderr  # 5 = no tests collected


# ------------------------------------------------------------------ the builder


def test_file_diff_of_created_and_deleted_files():
    created = unified_diff("pkg/new.py", None, "a\nb\n")
    assert (
        created
        == "diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+a\n+b\n"
    )
    deleted = unified_diff("pkg/old.py", "x\n", None)
    assert (
        deleted
        == "diff --git a/pkg/old.py b/pkg/old.py\ndeleted file mode 100644\n--- a/pkg/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    )


def _source(root: Path, files: Mapping[str, str]) -> Path:
    _write_tree(root, {"issue.md": "Title\n\nBody\n"} | dict(files))
    return root


def test_build_instance_with_created_deleted_and_context_files(tmp_path):
    src = _source(
        tmp_path / "demo__pkg-3",
        {
            "before/pkg/a.py": "x = 1\n",
            "after/pkg/a.py": "x = 2\n",
            "after/pkg/new.py": "y = 1\n",
            "before/pkg/gone.py": "z = 1\n",
            "context/pkg/util.py": "u = 0\n",
            "test_patch/tests/test_a.py": "def test(): pass\n",
        },
    )
    row = make.build_instance(src)
    assert row["repo"] == "swe-rl-demo/pkg"
    context = [(f["path"], f["content"]) for f in row["code_context"]]
    assert context == [
        ("pkg/a.py", "x = 1\n"),
        ("pkg/gone.py", "z = 1\n"),
        ("pkg/new.py", ""),
        ("pkg/util.py", "u = 0\n"),
    ]
    assert files_to_dict(row["oracle_new_content"]) == {
        "pkg/a.py": "x = 2\n",
        "pkg/gone.py": "",
        "pkg/new.py": "y = 1\n",
    }
    patched = apply_patch(files_to_dict(row["code_context"]), row["patch"])
    assert patched == files_to_dict(row["oracle_new_content"])
    assert apply_patch({}, row["test_patch"]) == {"tests/test_a.py": "def test(): pass\n"}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"before/p.py": "a\n", "after/p.py": "a\n", "test_patch/t.py": "x\n"}, "unchanged by the fix"),
        ({"before/p.py": "a", "after/p.py": "b\n", "test_patch/t.py": "x\n"}, "must end with a newline"),
        ({"before/p.py": "a\n", "after/p.py": "b\n"}, "no test files"),
        ({"test_patch/t.py": "x\n"}, "both empty"),
    ],
)
def test_malformed_sources_name_the_problem(tmp_path, files, message):
    src = _source(tmp_path / "demo__pkg-1", files)
    with pytest.raises(make.DemoSourceError, match=message):
        make.build_instance(src)


def test_instance_id_names_repository_and_number():
    assert make.parse_instance_id("demo__calspan-14") == ("calspan", 14)
    with pytest.raises(make.DemoSourceError, match="demo__<name>-<number>"):
        make.parse_instance_id("calspan-14")
