"""Keeping evaluation data out and near copies out: --exclude-repos and the near-duplicate rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from data.build import BuildConfig, build, main, parse_args
from data.fixtures.synthetic import RepoBuilder
from data.mining.filters import FilterConfig
from data.mining.neardup import NearDuplicates, lsh_bands, shingles, signature

ROOT = Path(__file__).resolve().parents[2]

STATEMENT = (
    "The parser crashes on an empty section header. Reading a file whose first line is [] raises "
    "IndexError in parse_header instead of the ParseError the documentation promises, and the "
    "line number in the message is off by one for every later section of the file as well."
)


def _module(name: str, offset: int) -> str:
    """A 30-function module whose functions return i + offset: PRs rewrite the offsets."""
    return "".join(
        f"def {name}_{i}(value):\n    total = value * {i}\n    return total + {offset}\n\n\n" for i in range(30)
    )


def _exit_code(argv: list[str]) -> int:
    """The command's exit code: what main returns, or what its one-line error exits with."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _counts(manifest: dict) -> dict[str, int]:
    return {k: v for k, v in manifest["counts"].items() if v}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """acme/parse with three squash merges, newest first in the walk:
    #3 #1's fix applied to a copy of the module, its description one word changed (a near copy);
    #2 the same description as #1 but another change to another module;
    #1 a fix of pkg/a.py."""
    path = tmp_path_factory.mktemp("history")
    r = RepoBuilder(path, origin_url="https://github.com/acme/parse")
    r.commit({"pkg/a.py": _module("a", 0), "pkg/a2.py": _module("a", 0), "pkg/b.py": _module("b", 0)}, "init")
    r.squash_pr(1, "Fix empty section headers", {"pkg/a.py": _module("a", 1)}, body=STATEMENT)
    r.squash_pr(2, "Fix empty section headers", {"pkg/b.py": _module("b", 0).replace("* ", "- ")}, body=STATEMENT)
    r.squash_pr(
        3, "Fix empty section headers", {"pkg/a2.py": _module("a", 1)}, body=STATEMENT.replace("crashes", "fails")
    )
    return path


def _build(history: Path, out: Path, **kw: object) -> dict:
    return build(BuildConfig(git=(str(history),), out=str(out), overwrite=True, **kw))  # type: ignore[arg-type]


# -- --exclude-repos ----------------------------------------------------------------------------


def test_exclude_repos_drops_every_pr_of_a_listed_repository(history: Path, tmp_path: Path) -> None:
    off = FilterConfig(near_dup_threshold=0)
    text = tmp_path / "repos.txt"
    text.write_text("# SWE-bench's repositories\nother/thing\nAcme/Parse\n")  # GitHub names ignore case
    manifest = _build(history, tmp_path / "o", exclude_repos=(str(text),), filters=off)
    assert _counts(manifest) == {"excluded_repo": 3}
    assert manifest["config"]["filters"]["exclude_repo_names"] == ["acme/parse", "other/thing"]
    # A SWE-bench file's `repo` values, JSON list and Parquet alike; another repository keeps all.
    rows = [{"instance_id": "acme__parse-9", "repo": "acme/parse"}, {"instance_id": "o__t-1", "repo": "other/thing"}]
    listed = tmp_path / "rows.json"
    listed.write_text(json.dumps(rows))
    assert _counts(_build(history, tmp_path / "o", exclude_repos=(str(listed),), filters=off)) == {"excluded_repo": 3}
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows[1:]), parquet)
    assert _counts(_build(history, tmp_path / "o", exclude_repos=(str(parquet),), filters=off)) == {"kept": 3}
    # An id on --exclude keeps its own reason; the repository's other PRs are excluded_repo.
    ids = tmp_path / "ids.txt"
    ids.write_text("acme__parse-2\n")
    both = _build(history, tmp_path / "o", exclude=(str(ids),), exclude_repos=(str(text),), filters=off)
    assert _counts(both) == {"excluded": 1, "excluded_repo": 2}


def test_exclude_repos_on_swebench_rows(tmp_path: Path) -> None:
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n"
    rows = [
        {
            "instance_id": f"{repo.replace('/', '__')}-{i}",
            "repo": repo,
            "base_commit": "c" * 40,
            "problem_statement": f"X is wrong in {repo} ({i})",
            "patch": patch,
            "code_context": {"m.py": "X = 1\n"},
        }
        for i, repo in enumerate(["psf/requests", "acme/w", "PSF/requests"])
    ]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    repos = tmp_path / "repos.txt"
    repos.write_text("psf/requests\n")
    cfg = BuildConfig(swebench=str(src), out=str(tmp_path / "o"), exclude_repos=(str(repos),))
    assert _counts(build(cfg)) == {"kept": 1, "excluded_repo": 2}


def test_exclude_repos_bad_input_is_one_line_naming_the_file(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "repos.txt"
    bad.write_text("psf/requests\nrequests\n")
    assert _exit_code(["--git", str(history), "--out", str(tmp_path / "o"), "--exclude-repos", str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"python -m data.build: error: {bad}: line 2: expected a repository as owner/name, got 'requests' (--exclude-repos)\n"
    )
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"instance_id": "x-1"}]))
    assert _exit_code(["--git", str(history), "--out", str(tmp_path / "o"), "--exclude-repos", str(rows)]) == 2
    assert f"{rows}: item 0: expected a repository as owner/name, got None" in capsys.readouterr().err
    assert (
        _exit_code(["--git", str(history), "--out", str(tmp_path / "o"), "--exclude-repos", str(tmp_path / "no")]) == 2
    )
    assert "no: no such file (--exclude-repos)" in capsys.readouterr().err
    assert _exit_code(["--git", str(history), "--out", str(tmp_path / "o"), "--near-dup-threshold", "1.5"]) == 2
    assert "near_dup_threshold must be in [0, 1] (0 = off), got 1.5" in capsys.readouterr().err


def test_help_documents_the_new_switches_with_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--exclude-repos FILE drop every PR of these repositories" in shown and "(default: none)" in shown
    assert "--near-dup-threshold J" in shown and "(default: 0.8; 0 = off)" in shown
    cfg = parse_args(["--git", "a", "--out", "o", "--exclude-repos", "r.txt", "--near-dup-threshold", "0.9"])
    assert cfg.exclude_repos == ("r.txt",) and cfg.filters.near_dup_threshold == 0.9


# -- near-duplicates ----------------------------------------------------------------------------


def test_shingles_and_bands() -> None:
    assert shingles("a b c") == {"a b c"}
    assert shingles("x = f(1)", k=3) == {"x = f", "= f (", "f ( 1", "( 1 )"}
    assert shingles("") == set()
    # The bands propose a pair at the threshold with probability >= 0.95; 1.0 needs one band.
    assert (lsh_bands(0.8), lsh_bands(0.9), lsh_bands(1.0)) == (32, 16, 1)


def test_near_duplicates_one_word_changed_is_dropped_a_different_patch_is_kept() -> None:
    patch = "".join(f"--- a/m.py\n+++ b/m.py\n@@ -{i} +{i} @@\n-x = {i}\n+x = {i + 1}\n" for i in range(40))
    near = NearDuplicates(0.8)
    assert near.check("o__r-1", STATEMENT, patch) == ("kept", "")
    reason, detail = near.check("o__r-2", STATEMENT.replace("crashes", "fails"), patch)
    assert reason == "near_duplicate" and detail.startswith("like o__r-1 (Jaccard ~0.")
    assert float(detail.split("~")[1].rstrip(")")) >= 0.8
    other = "".join(f"--- a/n.py\n+++ b/n.py\n@@ -{i} +{i} @@\n-y = {2 * i}\n+y = {3 * i}\n" for i in range(40))
    assert near.check("o__r-3", STATEMENT, other) == ("kept", "")  # same issue text, another fix
    # An evaluation row wins over the kept set, and is named.
    near.add_references([("swe__bench-7", STATEMENT, other.replace("y = 0", "y = -0"))])
    assert near.check("o__r-4", STATEMENT, other)[0] == "near_excluded"
    assert near.check("o__r-5", STATEMENT, other)[1].startswith("like swe__bench-7 (")


def test_build_drops_near_duplicates_deterministically(history: Path, tmp_path: Path) -> None:
    first = _build(history, tmp_path / "a")
    # The walk is newest first: #3 is kept, #1 is its near copy; #2 changes another module.
    assert _counts(first) == {"kept": 2, "near_duplicate": 1}
    assert [e.split(" (Jaccard")[0] for e in first["skip_examples"]["near_duplicate"]] == [
        "acme__parse-1: like acme__parse-3"
    ]
    kept = sorted(pads.dataset(tmp_path / "a").to_table().column("instance_id").to_pylist())
    assert kept == ["acme__parse-2", "acme__parse-3"]
    again = _build(history, tmp_path / "b")
    assert (again["counts"], again["skip_examples"]) == (first["counts"], first["skip_examples"])
    assert _counts(_build(history, tmp_path / "c", filters=FilterConfig(near_dup_threshold=0))) == {"kept": 3}


def test_build_drops_near_copies_of_an_evaluation_file(history: Path, tmp_path: Path) -> None:
    rows = [r for r in pads.dataset(_build_dir(history, tmp_path)).to_table().to_pylist()]
    row = next(r for r in rows if r["instance_id"] == "acme__parse-2")
    evaluation = [
        {
            "instance_id": "swe__bench-1",
            "repo": "swe/bench",
            "base_commit": "c" * 40,
            "problem_statement": row["problem_statement"].replace("promises", "says"),
            "patch": row["patch"],
        }
    ]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(evaluation))
    manifest = _build(history, tmp_path / "o", exclude=(str(path),))
    assert _counts(manifest) == {"kept": 1, "near_excluded": 1, "near_duplicate": 1}
    assert manifest["skip_examples"]["near_excluded"][0].startswith("acme__parse-2: like swe__bench-1 (Jaccard ~")


def _build_dir(history: Path, tmp_path: Path) -> Path:
    out = tmp_path / "plain"
    _build(history, out, filters=FilterConfig(near_dup_threshold=0))
    return out


def test_signatures_are_the_same_in_every_process() -> None:
    # Python salts str hashes per process (PYTHONHASHSEED); the signatures must not depend on it,
    # or two builds of the same input would drop different near-duplicates.
    code = (
        "from data.mining.neardup import signature; print(signature('issue text here', '+x = 1\\n-x = 2\\n').digest())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    here = signature("issue text here", "+x = 1\n-x = 2\n").digest()
    assert outs == {f"{here}\n"} and len(here) == 128
