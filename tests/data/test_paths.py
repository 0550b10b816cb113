"""data/paths.py: the one rule for a path from a patch or an answer, and file access beneath a
root that follows no link, on the host and inside the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from data.patching import PatchError, parse_patch
from data.paths import UnsafePath, delete_beneath, path_problem, read_beneath, repo_path, write_beneath
from reward.execution import sandbox


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", "empty path"),
        ("/etc/passwd", "absolute path"),
        ("../x.py", "path component '..'"),
        ("a/../../x.py", "path component '..'"),
        ("./a.py", "path component '.'"),
        ("a//b.py", "path component ''"),
        ("a/", "path component ''"),
        ("a\\b.py", "backslash in path"),
        ("a\0b.py", "NUL in path"),
    ],
)
def test_a_path_that_is_not_a_repository_file_is_refused(path: str, problem: str) -> None:
    assert path_problem(path) == problem
    with pytest.raises(UnsafePath, match="unsafe path"):
        repo_path(path)


@pytest.mark.parametrize("path", ["a.py", "pkg/sub/mod.py", ".github/workflows/ci.yml", "a b.py", "...py"])
def test_a_plain_relative_path_is_kept_verbatim(path: str) -> None:
    assert path_problem(path) is None and repo_path(path) == path


@pytest.mark.parametrize(
    "header",
    [
        "--- a/x.py\n+++ b//tmp/x.py\n",
        "--- a/x.py\n+++ b/../../x.py\n",
        "diff --git a/x.py b/y.py\nrename from /etc/hosts\nrename to y.py\n",
        "diff --git a/x.py b/y.py\ncopy from x.py\ncopy to ../y.py\n",
    ],
)
def test_a_patch_naming_an_unsafe_path_does_not_parse(header: str) -> None:
    with pytest.raises(PatchError, match="unsafe path"):
        parse_patch(header + "@@ -1 +1 @@\n-a\n+b\n")


@pytest.fixture
def tree_with_link(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose `link` points at a folder outside it (as a cloned repository can)."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 1\n")
    (root / "pkg" / "a.py").write_text("A = 1\n")
    os.symlink(outside, root / "link")
    os.symlink(outside / "secret.py", root / "pkg" / "alias.py")
    return root, outside


def test_reads_writes_and_deletes_stay_beneath_the_root(tree_with_link: tuple[Path, Path]) -> None:
    root, outside = tree_with_link
    assert read_beneath(root, "pkg/a.py") == b"A = 1\n"
    assert read_beneath(root, "pkg/missing.py") is None and read_beneath(root, "pkg") is None
    write_beneath(root, "new/deep/b.py", b"B = 2\n")
    assert (root / "new" / "deep" / "b.py").read_bytes() == b"B = 2\n"
    delete_beneath(root, "new/deep/b.py")
    assert not (root / "new" / "deep" / "b.py").exists()
    for rel in ("link/secret.py", "link/new.py"):
        with pytest.raises(UnsafePath, match="not a directory of the tree"):
            read_beneath(root, rel) if rel.endswith("secret.py") else write_beneath(root, rel, b"x")
    with pytest.raises(UnsafePath, match="a symbolic link"):
        read_beneath(root, "pkg/alias.py")
    write_beneath(root, "pkg/alias.py", b"REPLACED = 1\n")  # the link is replaced, not followed
    assert not (root / "pkg" / "alias.py").is_symlink()
    delete_beneath(root, "link")  # the link itself goes, not what it points at
    assert (outside / "secret.py").read_text() == "SECRET = 1\n" and sorted(os.listdir(outside)) == ["secret.py"]


@pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")
def test_the_sandbox_follows_no_link_when_it_writes_the_changes(tree_with_link: tuple[Path, Path]) -> None:
    # The host-side check is bypassed here (sandbox.run is given the changes directly): PID 1's
    # own walk refuses the write through the repository's link, as root, before anything runs.
    root, outside = tree_with_link
    result = sandbox.run(["/bin/true"], snapshot=root, changes={"link/planted.py": "x = 1\n"})
    assert result.returncode != 0 and "not a directory of the tree" in result.stderr
    assert sorted(os.listdir(outside)) == ["secret.py"]
    result = sandbox.run(["/bin/cat", "/testbed/pkg/alias.py"], snapshot=root, changes={"pkg/alias.py": "OWN = 1\n"})
    assert (result.returncode, result.stdout) == (0, "OWN = 1\n")
    assert (outside / "secret.py").read_text() == "SECRET = 1\n"
    with pytest.raises(UnsafePath):
        sandbox.run(["/bin/true"], snapshot=root, changes={"../x.py": "x"})
