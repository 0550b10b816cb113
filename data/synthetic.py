"""Small git histories with GitHub-style pull-request merges, built with the real git CLI.

Tests use them to assert exact instances and filter counts; `bench/mining.py` uses
`generate_history` when no real clone is given. Every commit gets a fixed author and date
(a counter), so the same calls give the same commit ids on every machine.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

DEFAULT_AUTHOR = ("Dev", "dev@example.com")
_EPOCH = 1_700_000_000  # fixed commit dates: EPOCH + 60 s per commit

Files = Mapping[str, "str | bytes | None"]  # path -> new text or bytes; None deletes the file


class RepoBuilder:
    """A work-tree repository at `path` whose default branch is `main`."""

    def __init__(self, path: str | Path, origin_url: str = "") -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._clock = 0
        self.git("init", "-q", "-b", "main")
        if origin_url:
            self.git("remote", "add", "origin", origin_url)

    def git(self, *args: str, author: tuple[str, str] = DEFAULT_AUTHOR) -> str:
        self._clock += 1
        date = f"@{_EPOCH + 60 * self._clock} +0000"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": author[0],
            "GIT_AUTHOR_EMAIL": author[1],
            "GIT_COMMITTER_NAME": "Maintainer",
            "GIT_COMMITTER_EMAIL": "maint@example.com",
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        proc = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace')}")
        return proc.stdout.decode().strip()

    def write(self, files: Files) -> None:
        for rel, content in files.items():
            p = self.path / rel
            if content is None:
                p.unlink()
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_bytes(content.encode("utf-8"))

    def commit(self, files: Files, message: str, author: tuple[str, str] = DEFAULT_AUTHOR) -> str:
        """Commit `files` on the current branch; return the commit id."""
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, author=author)
        return self.git("rev-parse", "HEAD")

    def checkout(self, rev: str, new_branch: str = "") -> None:
        self.git("checkout", "-q", *(["-b", new_branch] if new_branch else []), rev)

    def merge_pr(
        self,
        number: int,
        title: str,
        commits: list[tuple[Files, str]],
        *,
        start: str = "main",
        author: tuple[str, str] = DEFAULT_AUTHOR,
        branch: str = "",
        pull_ref: bool = False,
    ) -> str:
        """A PR branch from `start` with `commits`, merged into main the way GitHub's button does."""
        branch = branch or f"feature-{number}"
        self.checkout(start, new_branch=branch)
        for files, message in commits:
            head = self.commit(files, message, author=author)
        self.checkout("main")
        self.git(
            "merge", "-q", "--no-ff", "-m", f"Merge pull request #{number} from someone/{branch}\n\n{title}", branch
        )
        if pull_ref:
            self.git("update-ref", f"refs/pull/{number}/head", head)
        return self.git("rev-parse", "HEAD")

    def squash_pr(
        self, number: int, title: str, files: Files, body: str = "", author: tuple[str, str] = DEFAULT_AUTHOR
    ) -> str:
        """A squash merge: one commit on main whose subject ends in "(#N)"."""
        message = f"{title} (#{number})" + (f"\n\n{body}" if body else "")
        return self.commit(files, message, author=author)


def _module(i: int, version: int) -> str:
    funcs = "\n\n".join(f"def f{i}_{k}(x):\n    return x + {k}\n" for k in range(version + 1))
    return f'"""Module {i}."""\n\nfrom pkg import base\n\n\n{funcs}'


def generate_history(path: str | Path, num_prs: int, num_modules: int = 8) -> RepoBuilder:
    """A package of `num_modules` modules and `num_prs` merged PRs (merges and squashes alternating).

    Each PR adds a function to one module and a test; every 10th is a dependabot bump and
    every 7th changes only docs, so the filters have work to do.
    """
    repo = RepoBuilder(path, origin_url="https://github.com/example/synthetic.git")
    versions = [0] * num_modules
    files = {f"pkg/m{i}.py": _module(i, 0) for i in range(num_modules)}
    repo.commit(
        {"pkg/__init__.py": "", "pkg/base.py": "BASE = 1\n", "README.md": "# synthetic\n", **files}, "Initial commit"
    )
    for n in range(1, num_prs + 1):
        i = n % num_modules
        if n % 10 == 0:
            change: dict[str, str | bytes | None] = {"requirements.txt": f"dep=={n}\n"}
            title, author = f"Bump dep to {n}", ("dependabot[bot]", "bot@example.com")
        elif n % 7 == 0:
            change, title, author = {"README.md": f"# synthetic\n\nrelease {n}\n"}, f"Docs {n}", DEFAULT_AUTHOR
        else:
            versions[i] += 1
            change = {f"pkg/m{i}.py": _module(i, versions[i]), f"tests/test_m{i}.py": f"def test():\n    assert {n}\n"}
            title, author = f"Add f{i}_{versions[i]}, fixes #{1000 + n}", DEFAULT_AUTHOR
        if n % 2:
            repo.merge_pr(n, title, [(change, title)], author=author)
        else:
            repo.squash_pr(n, title, change, author=author)
    return repo
