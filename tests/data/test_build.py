"""The commands: `python -m data.build` (git, issue dumps, SWE-bench files, Ray) and
`python -m data.inspect`; bad input gives errors that name the file, line or field."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from data import build as build_mod
from data import inspect as inspect_mod
from data.build import BuildConfig, build, main, parse_args
from data.fixtures.synthetic import generate_history
from data.mining.filters import FilterConfig
from data.mining.sources import InputError, iter_swebench_rows, read_issue_index

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
# A snapshot of github.com/psf/requests (bare), where the session's fetch tool put it.
REQUESTS_CLONE = Path(os.environ.get("SWE_RL_REQUESTS_CLONE", "/work/.mirror/psf+requests/repo"))


def _shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (real data lives in ../shared/data)")
    return path


def _exit_code(argv: list[str], command: Callable[[list[str]], int] = main) -> int:
    """The command's exit code: what main returns, or what its one-line error exits with."""
    try:
        return command(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synthetic")
    generate_history(path, num_prs=24)
    return path


def _rows(out: Path) -> list[dict]:
    return pads.dataset(out).to_table().to_pylist()


def test_cli_prints_the_summary_and_inspect_shows_an_instance(
    synthetic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["--git", str(synthetic), "--out", str(out), "--no-filter-bots"]) == 0
    printed = capsys.readouterr().out
    # 24 PRs: 19 code changes; #7, #14, #21 docs only; the bumps #10, #20 are not dropped as
    # bots here, and change no code file either.
    assert "\nkept                     19   79.2%\n" in printed
    assert "\nbot                       0    0.0%\n" in printed and "\nno_code                   5" in printed
    assert _exit_code(["--git", str(synthetic), "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert inspect_mod.main([str(out), "--index", "1", "--chars", "40"]) == 0
    shown = capsys.readouterr().out
    assert "instances: 19" in shown and "swe_rl.schema_version: '4'" in shown
    assert "instance_id: example__synthetic-23" in shown and "more characters]" in shown
    assert _exit_code([str(out), "--index", "99"], inspect_mod.main) == 2


def test_flags_map_onto_the_config() -> None:
    cfg = parse_args(
        [
            "--git",
            "a",
            "--git",
            "b",
            "--out",
            "o",
            "--max-hunks",
            "7",
            "--filter-require-linked-issue",
            "--no-filter-dedupe",
            "--relevant-files",
            "0",
            "--workers",
            "2",
        ]
    )
    assert cfg.git == ("a", "b") and cfg.relevant_files == 0 and cfg.workers == 2
    assert cfg.filters == FilterConfig(max_hunks=7, require_linked_issue=True, dedupe=False)
    assert parse_args(["--git", "a", "--out", "o"]).filters == FilterConfig()


def _descendants() -> set[str]:
    """Process ids of every descendant of this process (a local Ray's gcs, raylet, workers)."""
    ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[str, list[str]] = {}
    for pid, ppid in (line.split() for line in ps.splitlines() if line.strip()):
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [str(os.getpid())]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _listening_off_loopback() -> list[str]:
    """Listening TCP sockets of this process's children (its local Ray) not bound to 127.0.0.1.

    Other programs on the machine (other test runs, other Rays) are ignored.
    """
    ours = _descendants() | {str(os.getpid())}
    out = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True, check=True).stdout
    lines = [ln.split() for ln in out.splitlines()[1:]]
    mine = [f for f in lines if any(f"pid={p}," in " ".join(f[5:]) for p in ours)]
    return [" ".join(f) for f in mine if not f[3].startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:"))]


def test_ray_with_two_workers_gives_the_in_process_result(
    synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = build(BuildConfig(git=(str(synthetic),), out=str(tmp_path / "local"), shard_size=7))
    check_sockets = shutil.which("ss") is not None and shutil.which("ps") is not None
    sockets: list[list[str]] = []
    real = build_mod.map_on_ray

    def spy(*args, **kw):
        if check_sockets:
            sockets.append(_listening_off_loopback())
        yield from real(*args, **kw)

    monkeypatch.setattr(build_mod, "map_on_ray", spy)
    on_ray = build(BuildConfig(git=(str(synthetic),), out=str(tmp_path / "ray"), shard_size=7, workers=2, chunk_size=3))
    assert sockets in ([], [[]])  # every socket of the local Ray is on 127.0.0.1
    assert on_ray["parallel"] == {"mode": "ray", "workers": 2}
    assert on_ray["counts"] == local["counts"] and on_ray["shards"] == local["shards"]
    assert pads.dataset(tmp_path / "ray").to_table().equals(pads.dataset(tmp_path / "local").to_table())


def test_bad_inputs_name_the_path_line_or_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["--git", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert f"{tmp_path}: not a git repository" in capsys.readouterr().err
    assert _exit_code(["--git", str(tmp_path), "--out", str(tmp_path / "o"), "--shard-size", "0"]) == 2
    assert "shard_size must be >= 1, got 0" in capsys.readouterr().err
    bad = tmp_path / "issues.jsonl"
    bad.write_text('{"number": 1, "title": "a", "body": ""}\n{"number": 2, "title": \n')
    with pytest.raises(InputError, match=r"issues.jsonl: line 2: malformed JSON"):
        read_issue_index([str(bad)], "o/r")
    bad.write_text('{"number": 1, "body": ""}\n')
    with pytest.raises(InputError, match=r"issues.jsonl: line 1: missing field 'title'"):
        read_issue_index([str(bad)], "o/r")
    rows = tmp_path / "rows.json"
    rows.write_text(
        json.dumps([{"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "problem_statement": "p"}])
    )
    with pytest.raises(InputError, match=r"rows.json: item 0: field 'patch' is missing"):
        list(iter_swebench_rows(rows))
    rows.write_text(
        json.dumps(
            [
                {
                    "instance_id": "o__r-1",
                    "repo": "o/r",
                    "base_commit": "abc",
                    "problem_statement": "p",
                    "patch": "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n",
                }
            ]
        )
    )
    assert _exit_code(["--swebench", str(rows), "--out", str(tmp_path / "o")]) == 2
    assert "item 0: the row has no code_context: pass --git" in capsys.readouterr().err


def test_unknown_base_commit_and_other_repositories_are_counted(synthetic: Path, tmp_path: Path) -> None:
    patch = "--- a/pkg/base.py\n+++ b/pkg/base.py\n@@ -1 +1 @@\n-BASE = 1\n+BASE = 2\n"
    first = subprocess.run(
        ["git", "-C", str(synthetic), "rev-list", "--max-parents=0", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    rows = [
        {
            "instance_id": f"example__synthetic-{i}",
            "repo": repo,
            "base_commit": base,
            "problem_statement": "base is wrong",
            "patch": patch,
        }
        for i, (repo, base) in enumerate(
            [("example/synthetic", first), ("example/synthetic", "f" * 40), ("other/repo", first)]
        )
    ]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    manifest = build(BuildConfig(swebench=str(path), git=(str(synthetic),), out=str(tmp_path / "o")))
    assert {k: v for k, v in manifest["counts"].items() if v} == {"kept": 1, "unknown_commit": 1, "other_repo": 1}
    # Each skip names its row and why, on stderr and in the manifest.
    (unknown,) = manifest["skip_examples"]["unknown_commit"]
    assert unknown.startswith("example__synthetic-1: ") and f"base_commit {'f' * 40} is not in" in unknown
    assert "other/repo is not example/synthetic" in manifest["skip_examples"]["other_repo"][0]
    row = _rows(tmp_path / "o")[0]
    assert row["code_context"][0] == {"path": "pkg/base.py", "content": "BASE = 1\n"}
    assert row["oracle_new_content"] == [{"path": "pkg/base.py", "content": "BASE = 2\n"}]
    assert row["problem_source"] == "swebench" and row["pr_number"] == 0


def test_swebench_rows_with_their_own_files(tmp_path: Path) -> None:
    src = _shared("requests_lite.jsonl")
    manifest = build(BuildConfig(swebench=str(src), out=str(tmp_path)))
    assert manifest["counts"]["kept"] == 6
    expected = {r["instance_id"]: r for r in map(json.loads, src.read_text().splitlines())}
    for row in _rows(tmp_path):
        want = expected[row["instance_id"]]
        assert {f["path"]: f["content"] for f in row["oracle_new_content"]} == want["oracle_new_content"]
        assert row["patch"] == want["patch"] and row["base_commit"] == want["base_commit"]


def test_real_clone_reproduces_swebench_contexts(tmp_path: Path) -> None:
    """SWE-bench Lite's psf/requests rows, read against a real clone, give the contexts the
    SWE-bench authors stored (requests_lite.jsonl) file for file."""
    if not (REQUESTS_CLONE / "HEAD").is_file():
        pytest.skip(f"no psf/requests clone at {REQUESTS_CLONE} (set SWE_RL_REQUESTS_CLONE)")
    lite, stored = _shared("swebench_lite.json"), _shared("requests_lite.jsonl")
    manifest = build(
        BuildConfig(swebench=str(lite), git=(str(REQUESTS_CLONE),), repo="psf/requests", out=str(tmp_path))
    )
    assert manifest["counts"]["kept"] == 6 and manifest["counts"]["other_repo"] == 294
    expected = {r["instance_id"]: r for r in map(json.loads, stored.read_text().splitlines())}
    for row in _rows(tmp_path):
        context = {f["path"]: f["content"] for f in row["code_context"]}
        want = expected[row["instance_id"]]
        assert {p: context[p] for p in want["code_context"]} == want["code_context"]
        assert {f["path"]: f["content"] for f in row["oracle_new_content"]} == want["oracle_new_content"]
        assert len(context) > len(want["code_context"])  # relevant unchanged files were added


def test_module_entry_points_run(synthetic: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    run = subprocess.run(
        [sys.executable, "-m", "data.build", "--git", str(synthetic), "--out", str(out), "--limit", "5"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert "candidates                5" in run.stdout
    shown = subprocess.run([sys.executable, "-m", "data.inspect", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0 and "instances: 3" in shown.stdout


def test_full_swebench_rows_are_read_with_their_optional_fields() -> None:
    rows = list(iter_swebench_rows(_shared("swebench_dev_rows.json")))
    assert len(rows) == 5
    where, row = rows[0]
    assert where.endswith("swebench_dev_rows.json: item 0") and row["instance_id"] == "pydicom__pydicom-1458"
    assert row["test_patch"].startswith("diff --git a/pydicom/tests/") and row["FAIL_TO_PASS"]
