"""Mining a git history built here, one pull request per rule, into exact instances and counts.

The history (oldest first): an initial commit; PR #1 merged with a merge commit after main
moved on (PR #2 squashed meanwhile); a dependabot merge (#3); a "Bump" squash (#4); a rename
(#5); a deletion (#6); a binary file (#7); a Latin-1 file (#8); tests only (#9); docs only
(#10); eleven files (#11); a reset of pkg/other.py (#12) and a repeat of #2's change (#13;
the newest is kept, so #2 becomes the duplicate); a merge whose message does not name the PR
but whose head is refs/pull/14/head (#14); a direct commit that is no PR; an empty squash (#15).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from data.build import BuildConfig, build
from data.fixtures.synthetic import RepoBuilder
from data.git.pulls import merged_pull_requests
from data.git.repo import Repo
from data.patching import parse_patch

CORE = "from pkg.util import helper\n\n\ndef parse(x):\n    return helper() + x\n"
CORE_FIXED = CORE.replace("helper() + x", "helper() + int(x)")
UTIL = "def helper():\n    return 1\n"
USER = "from pkg import core\n\n\ndef use():\n    return core.parse(1)\n"
OLD = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(10))
GONE = "def gone():\n    pass\n"
BOT = ("dependabot[bot]", "49699333+dependabot[bot]@users.noreply.github.com")


def make_history(path: Path) -> dict[str, str]:
    """Build the history above; return the commit ids the assertions need."""
    r = RepoBuilder(path, origin_url="git@github.com:acme/widgets.git")
    ids = {
        "c0": r.commit(
            {
                "pkg/__init__.py": "",
                "pkg/util.py": UTIL,
                "pkg/core.py": CORE,
                "pkg/user.py": USER,
                "pkg/other.py": "X = 1\n",
                "pkg/old.py": OLD,
                "pkg/gone.py": GONE,
                "pkg/latin.py": "NAME = 'x'\n",
                "README.md": "# widgets\n",
                "tests/test_core.py": "def test():\n    pass\n",
            },
            "Initial commit",
        )
    }
    r.checkout("main", new_branch="fix-parse")
    ids["head1"] = r.commit(
        {"pkg/core.py": CORE_FIXED, "tests/test_core.py": "def test():\n    assert 1\n"},
        "Handle strings\n\ncloses #101",
    )
    r.checkout("main")
    ids["sq2"] = r.squash_pr(2, "Tune other", {"pkg/other.py": "X = 2\n"})
    r.git(
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge pull request #1 from alice/fix-parse\n\nFix parse, fixes #100",
        "fix-parse",
    )
    ids["m1"] = r.git("rev-parse", "HEAD")
    r.merge_pr(
        3, "Update dep", [({"pkg/other.py": "X = 3\n"}, "Update dep")], author=BOT, branch="dependabot/pip/dep-3"
    )
    r.squash_pr(4, "Bump version to 2", {"pkg/__init__.py": "VERSION = 2\n"})
    r.squash_pr(5, "Rename old to new", {"pkg/old.py": None, "pkg/new.py": OLD.replace("return 9", "return 99")})
    r.squash_pr(6, "Remove gone", {"pkg/gone.py": None})
    r.squash_pr(7, "Add logo", {"pkg/logo.png": b"\x89PNG\x00\x01\x02", "pkg/util.py": UTIL + "\nLOGO = 1\n"})
    r.squash_pr(8, "Accent", {"pkg/latin.py": "NAME = 'café'\n".encode("latin-1")})
    r.squash_pr(9, "More tests", {"tests/test_core.py": "def test():\n    assert 2\n"})
    r.squash_pr(10, "Docs", {"README.md": "# widgets\n\nMore.\n"})
    r.squash_pr(11, "Many files", {f"pkg/gen/f{i}.py": f"V = {i}\n" for i in range(11)})
    r.squash_pr(12, "Reset other", {"pkg/other.py": "X = 1\n"})  # 3 -> 1
    r.squash_pr(13, "Tune other again", {"pkg/other.py": "X = 2\n"})  # 1 -> 2: #2's patch again
    r.checkout("main", new_branch="helper-two")
    ids["head14"] = r.commit({"pkg/util.py": "def helper():\n    return 2\n"}, "Helper returns 2")
    r.checkout("main")
    r.git("merge", "-q", "--no-ff", "-m", "Merge branch 'helper-two'", "helper-two")
    r.git("update-ref", "refs/pull/14/head", ids["head14"])
    r.commit({"README.md": "# widgets\n\nTidy.\n"}, "Tidy the readme")
    r.squash_pr(15, "Nothing", {})
    return ids


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("widgets")
    return path, make_history(path)


@pytest.fixture(scope="module")
def built(history: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    out = tmp_path_factory.mktemp("out")
    manifest = build(BuildConfig(git=(str(history[0]),), out=str(out), shard_size=4))
    rows = {r["instance_id"]: r for r in pads.dataset(out).to_table().to_pylist()}
    return manifest, rows


def _files(row: dict, key: str) -> dict[str, str]:
    return {f["path"]: f["content"] for f in row[key]}


def test_recognises_merges_squashes_and_pull_refs(history: tuple[Path, dict[str, str]]) -> None:
    with Repo(history[0]) as repo:
        prs = list(merged_pull_requests(repo))
    assert [p.number for p in prs] == [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 1, 2]
    kinds = {p.number: p.kind for p in prs}
    assert (kinds[1], kinds[2], kinds[14]) == ("merge", "squash", "pull_ref")
    pr1 = next(p for p in prs if p.number == 1)
    assert (pr1.title, pr1.head, pr1.source_branch) == ("Fix parse, fixes #100", history[1]["head1"], "alice/fix-parse")
    assert pr1.merged_at.endswith("Z")


def test_counts_per_filter(built: tuple[dict, dict]) -> None:
    manifest, _ = built
    nonzero = {k: v for k, v in manifest["counts"].items() if v}
    assert nonzero == {
        "kept": 6,
        "bot": 2,
        "binary": 1,
        "undecodable": 1,
        "tests_only": 1,
        "no_code": 1,
        "too_many_files": 1,
        "duplicate": 1,
        "empty": 1,
    }
    assert manifest["candidates"] == 15
    assert manifest["source"]["repositories"][0]["repo"] == "acme/widgets"  # from the origin URL


def test_merge_instance_is_exact(built: tuple[dict, dict], history: tuple[Path, dict[str, str]]) -> None:
    row = built[1]["acme__widgets-1"]
    # The base is the merge base, not the branch tip at merge time: PR #2's change is absent.
    assert row["base_commit"] == history[1]["c0"]
    assert row["problem_statement"] == "Fix parse, fixes #100"
    assert (row["problem_source"], row["linked_issues"], row["pr_number"]) == ("pr", [100, 101], 1)
    assert "pkg/other.py" not in row["patch"] and "tests/" not in row["patch"]
    assert "-    return helper() + x\n+    return helper() + int(x)\n" in row["patch"]
    assert row["test_patch"].startswith("diff --git a/tests/test_core.py b/tests/test_core.py")
    # Changed file first, then the module it imports, then the module importing it.
    assert _files(row, "code_context") == {"pkg/core.py": CORE, "pkg/util.py": UTIL, "pkg/user.py": USER}
    assert [f["path"] for f in row["code_context"]] == ["pkg/core.py", "pkg/util.py", "pkg/user.py"]
    assert _files(row, "oracle_new_content") == {"pkg/core.py": CORE_FIXED}


def test_rename_deletion_and_pull_ref_instances(built: tuple[dict, dict]) -> None:
    rows = built[1]
    assert sorted(rows) == sorted(f"acme__widgets-{n}" for n in (1, 5, 6, 12, 13, 14))
    rename = rows["acme__widgets-5"]
    assert "rename from pkg/old.py\nrename to pkg/new.py" in rename["patch"]
    assert _files(rename, "code_context") == {"pkg/old.py": OLD, "pkg/new.py": ""}
    new = OLD.replace("return 9", "return 99")
    assert _files(rename, "oracle_new_content") == {"pkg/old.py": "", "pkg/new.py": new}
    gone = rows["acme__widgets-6"]
    assert _files(gone, "code_context") == {"pkg/gone.py": GONE}
    assert _files(gone, "oracle_new_content") == {"pkg/gone.py": ""}
    pull = rows["acme__widgets-14"]
    assert pull["problem_statement"] == "Merge branch 'helper-two'"
    assert [f["path"] for f in pull["code_context"]] == ["pkg/util.py", "pkg/core.py"]
    assert rows["acme__widgets-13"]["test_patch"] == ""


def test_bare_mirror_and_plain_clone_give_the_same_instances(
    history: tuple[Path, dict[str, str]], built: tuple[dict, dict], tmp_path: Path
) -> None:
    bare, plain = tmp_path / "bare.git", tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", "--mirror", str(history[0]), str(bare)], check=True)
    subprocess.run(["git", "clone", "-q", str(history[0]), str(plain)], check=True)
    # A plain clone lacks refs/pull/*: PR #14 is then no candidate; everything else is equal.
    for clone, expected in ((bare, built[1]), (plain, {k: v for k, v in built[1].items() if not k.endswith("-14")})):
        out = tmp_path / f"out-{clone.name}"
        build(BuildConfig(git=(str(clone),), repo="acme/widgets", out=str(out)))
        rows = {r["instance_id"]: r for r in pads.dataset(out).to_table().to_pylist()}
        assert rows == expected


def test_issue_dump_supplies_problem_statements(history: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    dump = tmp_path / "issues.jsonl"
    dump.write_text(
        "\n".join(
            [
                '{"number": 100, "title": "parse fails on strings", "body": "parse(\'1\') raises", '
                '"user": {"login": "bob"}, "repository_url": "https://api.github.com/repos/acme/widgets"}',
                '{"type": "IssuesEvent", "repo": {"name": "acme/widgets"}, "payload": {"action": "opened", '
                '"issue": {"number": 101, "title": "old title", "body": null}}}',
                '{"type": "IssuesEvent", "repo": {"name": "acme/widgets"}, "payload": {"action": "edited", '
                '"issue": {"number": 101, "title": "strings again", "body": "still"}}}',
                '{"type": "IssuesEvent", "repo": {"name": "other/repo"}, "payload": {"action": "opened", '
                '"issue": {"number": 102, "title": "elsewhere", "body": ""}}}',
                '{"type": "PullRequestEvent", "repo": {"name": "acme/widgets"}, "payload": {"number": 5, '
                '"pull_request": {"number": 5, "title": "Rename", "body": "Resolves #102", "user": {"login": "carol"}}}}',
                '{"type": "WatchEvent", "repo": {"name": "acme/widgets"}, "payload": {}}',
                '{"number": 102, "title": "old.py is misnamed", "body": "rename it", '
                '"html_url": "https://github.com/acme/widgets/issues/102"}',
            ]
        )
        + "\n"
    )
    out = tmp_path / "out"
    manifest = build(BuildConfig(git=(str(history[0]),), issues=(str(dump),), out=str(out)))
    assert {k: v for k, v in manifest["counts"].items() if v} == {"kept": 2, "bot": 2, "no_linked_issue": 11}
    rows = {r["instance_id"]: r for r in pads.dataset(out).to_table().to_pylist()}
    assert rows["acme__widgets-1"]["problem_statement"] == (
        "parse fails on strings\nparse('1') raises\n\nstrings again\nstill"
    )
    assert rows["acme__widgets-1"]["problem_source"] == "issue"
    assert rows["acme__widgets-5"]["problem_statement"] == "old.py is misnamed\nrename it"
    assert rows["acme__widgets-5"]["linked_issues"] == [102]


def test_git_apply_agrees_with_every_instance(built: tuple[dict, dict], tmp_path: Path) -> None:
    """An independent applier: `git apply` of each patch onto its context gives the new contents."""
    for iid, row in built[1].items():
        work = tmp_path / iid
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        created = {fp.new_path for fp in parse_patch(row["patch"]) if fp.new_path != fp.old_path}  # new or renamed to
        for path, content in _files(row, "code_context").items():
            if path not in created:
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_bytes(content.encode())
        subprocess.run(["git", "-C", str(work), "apply", "-"], input=row["patch"].encode(), check=True)
        for path, content in _files(row, "oracle_new_content").items():
            got = (work / path).read_bytes().decode() if (work / path).exists() else ""
            assert got == content, (iid, path)
