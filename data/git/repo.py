"""A thin, read-only view of a local git repository (plain clone or bare) through the git CLI.

Mining reads many blobs per pull request; one long-lived `git cat-file --batch` process
serves them all, which is an order of magnitude faster than one `git show` per file. Other
queries (log, diff, merge-base) are one subprocess each. Nothing here writes to the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

# Fixed output formats regardless of the user's git config: no colour, no pager, no external
# diff drivers, unquoted UTF-8 paths, no "mnemonic" or missing a/ b/ prefixes.
_GIT_CONFIG = (
    "-c",
    "core.quotepath=off",
    "-c",
    "color.ui=never",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicprefix=false",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
)
_REMOTE_RE = re.compile(r"[:/]([^/:]+)/([^/]+?)(?:\.git)?/?$")


_NAMED_CLONE_RE = re.compile(r"^([\w.-]+/[\w.-]+)=(.+)$")


def parse_clone(entry: str | Path) -> tuple[str | None, Path]:
    """A `--git` entry: ("owner/name", PATH) of `owner/name=PATH`, (None, path) of a plain path.

    Mirrors and bare clones often have no origin remote and a directory name that says nothing
    (`/work/.mirror/psf+requests/repo`): the explicit form names the repository they hold. A
    path that exists as given is a path, even with a "=" in it."""
    m = _NAMED_CLONE_RE.match(str(entry))
    return (m.group(1), Path(m.group(2))) if m and not Path(entry).exists() else (None, Path(entry))


class GitError(RuntimeError):
    """A git command failed; the message names the repository and the command."""


class NotARepositoryError(GitError):
    """The path given as a repository is not one."""


class Repo:
    """A git repository at `path`; use as a context manager to close the blob reader."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(Path(path).resolve())
        if not Path(self.path).is_dir():
            raise NotARepositoryError(f"{self.path}: no such directory")
        proc = subprocess.run(["git", "-C", self.path, "rev-parse", "--git-dir"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise NotARepositoryError(f"{self.path}: not a git repository ({proc.stderr.strip()})")
        self._batch: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._batch is not None:
            assert self._batch.stdin is not None
            self._batch.stdin.close()
            self._batch.wait()
            self._batch = None

    def run(self, *args: str, check: bool = True) -> bytes:
        """Run `git <args>` in the repository and return its stdout bytes."""
        proc = subprocess.run(["git", "-C", self.path, *_GIT_CONFIG, *args], capture_output=True)
        if check and proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise GitError(f"{self.path}: git {' '.join(args[:4])} failed: {err}")
        return proc.stdout

    def text(self, *args: str) -> str:
        return self.run(*args).decode("utf-8", "replace")

    def stream(self, *args: str) -> subprocess.Popen[bytes]:
        """Start `git <args>` with stdout piped, for outputs too long to hold (history walks)."""
        return subprocess.Popen(
            ["git", "-C", self.path, *_GIT_CONFIG, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def resolve(self, rev: str) -> str | None:
        """Full sha of the commit `rev` names, or None when the repository has no such commit."""
        out = self.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        return out.decode().strip() or None

    def default_branch(self) -> str:
        """origin's default branch when the clone knows it (refs/remotes/origin/HEAD), else HEAD."""
        out = self.run("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD", check=False).strip()
        if out and self.resolve(out.decode()):
            return out.decode()
        out = self.run("symbolic-ref", "--quiet", "HEAD", check=False).strip()
        if out and self.resolve(out.decode()):
            return out.decode()
        if self.resolve("HEAD"):
            return "HEAD"
        raise GitError(f"{self.path}: the repository has no commits (HEAD does not resolve)")

    def owner_name(self) -> str:
        """ "owner/name" from the origin remote's URL, else "local/<directory name>"."""
        url = self.run("config", "--get", "remote.origin.url", check=False).decode().strip()
        m = _REMOTE_RE.search(url)
        if m:
            return f"{m.group(1)}/{m.group(2)}"
        path = Path(self.path)
        name = path.parent.name if path.name == ".git" else path.name.removesuffix(".git")
        return f"local/{name}"

    def merge_base(self, a: str, b: str) -> str | None:
        out = self.run("merge-base", a, b, check=False).decode().strip()
        return out or None

    def pull_heads(self) -> dict[str, int]:
        """{head sha: PR number} of every `refs/pull/N/head` the clone has fetched."""
        out = self.text("for-each-ref", "--format=%(objectname) %(refname)", "refs/pull/")
        heads: dict[str, int] = {}
        for line in out.splitlines():
            sha, ref = line.split(" ", 1)
            parts = ref.split("/")
            if len(parts) == 4 and parts[3] == "head" and parts[2].isdigit():
                # Two PRs can share a head commit (a PR re-opened as a new one): the first keeps it.
                heads.setdefault(sha, int(parts[2]))
        return heads

    def blob(self, spec: str) -> bytes | None:
        """Contents of the object `spec` (a blob sha or `<commit>:<path>`), None when missing."""
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "-C", self.path, "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert self._batch.stdin is not None and self._batch.stdout is not None
        self._batch.stdin.write(spec.encode() + b"\n")
        self._batch.stdin.flush()
        header = self._batch.stdout.readline()
        if not header:
            raise GitError(f"{self.path}: git cat-file --batch exited while reading {spec}")
        fields = header.split()
        if len(fields) < 3 or fields[-1] == b"missing":
            return None
        size = int(fields[2])
        data = self._batch.stdout.read(size)
        self._batch.stdout.read(1)  # the newline cat-file writes after every object
        return data
