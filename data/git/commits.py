"""Commits written into a local clone without a work tree: a parent with some files replaced.

Made instances (data/inject/) whose snapshot is a git commit need their buggy tree as a commit
of the clone the test runners read (`git archive <base_commit>`), as SWE-smith keeps a branch
per bug in its mirror. Git's plumbing writes it without touching any checkout: the blobs
(`hash-object -w`), a tree from the parent's with those entries replaced (`update-index` on a
private index file), the commit (`commit-tree`) and a ref that keeps it from garbage
collection. Author, committer and dates are fixed, so the same change on the same parent gives
the same commit id on every machine: a clone that makes the commit again gets the id the
instance names.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from data.git.repo import GitError

IDENTITY = {
    "GIT_AUTHOR_NAME": "swe-rl inject",
    "GIT_AUTHOR_EMAIL": "inject@swe-rl.invalid",
    "GIT_COMMITTER_NAME": "swe-rl inject",
    "GIT_COMMITTER_EMAIL": "inject@swe-rl.invalid",
    # The parent's date would tie the id to nothing more; a constant keeps it reproducible.
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


def _git(clone: Path, args: list[str], env: dict[str, str], stdin: bytes | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(clone), *args], input=stdin, capture_output=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise GitError(f"{clone}: git {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode().strip()


def commit_files(clone: Path, parent: str, files: dict[str, str | None], message: str, ref: str) -> str:
    """The id of a commit on `parent` whose tree is the parent's with `files` replaced (None:
    removed), recorded under `ref` (refs/...). A file keeps its mode; a new one is 100644."""
    with tempfile.TemporaryDirectory(prefix="swe-rl-index-") as tmp:
        env = {**os.environ, **IDENTITY, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(clone, ["read-tree", parent], env)
        modes = {}
        listing = _git(clone, ["ls-tree", "-r", parent, "--", *sorted(files)], env) if files else ""
        for line in listing.splitlines():
            meta, path = line.split("\t", 1)
            modes[path] = meta.split()[0]
        for path, content in sorted(files.items()):
            if content is None:
                _git(clone, ["update-index", "--force-remove", "--", path], env)
                continue
            blob = _git(clone, ["hash-object", "-w", "--stdin"], env, content.encode())
            _git(clone, ["update-index", "--add", "--cacheinfo", f"{modes.get(path, '100644')},{blob},{path}"], env)
        tree = _git(clone, ["write-tree"], env)
        commit = _git(clone, ["commit-tree", tree, "-p", parent, "-m", message], env)
        _git(clone, ["update-ref", ref, commit], env)
    return commit
