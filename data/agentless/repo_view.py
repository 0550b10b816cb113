"""The repository at an instance's base commit as the model sees it: its source files, and any
of them whole on request. The Agentless-Mini evaluation (actors/eval/agentless_mini.py) localizes on the
tree and repairs with whole files from here.

Two sources, the same two the sandbox's snapshots use (reward/execution/snapshots.py):

    files  the demo set: the instance's code context is the whole repository (minus the files
           the oracle patch creates, which do not exist at the base commit)
    git    a local clone (`git=` / `--git`, found by repository name as the snapshots find it):
           `git ls-tree` and `git cat-file` at `base_commit`, nothing checked out

Shown files (`is_source`), by the language of the instance's test runner (runners.TestRunner.
language): a Python repository's Python sources (`.py`, `.pyi`, `.pyx`); a JavaScript one's
JavaScript/TypeScript sources (`.js .jsx .mjs .cjs .ts .tsx .mts .cts`), not declaration files
(`.d.ts`), minified bundles (`.min.js`) nor the files under `coverage/`, `bower_components/` and
the like (JS_SKIPPED_DIRS); so a Python repository's static JavaScript (Django's admin) stays
out of its tree, and a JavaScript one's build scripts in Python out of its. In both, files
in vendored, generated and build directories are not shown. Vendored directories are found by
name, as no tree records what it copied: `vendor`, `_vendor`, `third_party` and the like
anywhere, and `packages`, `extern`, `externals` below the top level (where a package keeps its
copies, as requests did in `requests/packages/`), not at the root (a monorepo's `packages/NAME/`
is its own code). The paper's Agentless shows only Python files (its benchmark is Python's);
binary files are excluded by construction, and a file that does not decode as UTF-8 reads as
None.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from data.git.repo import GitError, Repo
from data.patching import created_files
from data.schema import Instance

PYTHON_SUFFIXES = (".py", ".pyi", ".pyx")
# reward/execution/runners.JS_SUFFIXES's list (this layer cannot import the harness's).
JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
# Directory names whose files are not the project's own code (vendored copies, build outputs,
# caches, environments): shown, they fill the tree with files no fix touches.
SKIPPED_DIRS = frozenset(
    {
        "vendor",
        "vendored",
        "_vendor",
        "third_party",
        "thirdparty",
        "external",
        "node_modules",
        "site-packages",
        "build",
        "dist",
        "__pycache__",
        ".git",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        ".eggs",
    }
)
# Directory names that hold vendored copies only below the top level: requests' own
# `requests/packages/` (urllib3, chardet, idna), setuptools' `setuptools/extern/`, `pkg/externals/`.
# At the repository root the same names are usually a monorepo's own code (`packages/<name>/`),
# so they are skipped only inside another directory.
NESTED_VENDOR_DIRS = frozenset({"packages", "extern", "externals"})
# Generated modules, by their name's ending (protocol buffers, parser tables, version files).
GENERATED_SUFFIXES = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi", "parsetab.py", "_version.py")
# JavaScript files that are not the project's source: TypeScript declarations (written for or
# generated from the code, never where a fix goes) and minified bundles.
JS_GENERATED = re.compile(r"\.d\.[mc]?ts$|[.-]min\.[mc]?js$")
# Folders of a JavaScript project's outputs and installed copies (coverage reports, bower's and
# jspm's packages, yarn's cache), beside SKIPPED_DIRS.
JS_SKIPPED_DIRS = frozenset({"coverage", ".nyc_output", "bower_components", "jspm_packages", ".yarn", ".next", ".nuxt"})


class RepoUnavailable(RuntimeError):
    """The repository cannot be read (no clone of it, an unknown commit); the message says which."""


def is_source(path: str, language: str = "python") -> bool:
    """Whether a repository path is shown to the model in a repository of `language`
    ("python" or "javascript"; see the module docstring)."""
    parts = path.split("/")
    name, dirs = parts[-1], parts[:-1]
    if language == "javascript":
        if not name.endswith(JS_SUFFIXES) or JS_GENERATED.search(name) or any(p in JS_SKIPPED_DIRS for p in dirs):
            return False
    elif not name.endswith(PYTHON_SUFFIXES) or name.endswith(GENERATED_SUFFIXES):
        return False
    if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in dirs):
        return False
    return not any(part in NESTED_VENDOR_DIRS for part in dirs[1:])


@dataclass
class RepoView:
    """The shown files of one repository at one commit, and a reader of whole files."""

    files: list[str]  # shown paths, sorted
    reader: Callable[[str], str | None]  # path -> content at the commit; None when absent or binary

    def read(self, path: str) -> str | None:
        return self.reader(path) if path in self.files else None


def files_view(instance: Instance, language: str = "python") -> RepoView:
    """The demo set's repository: the code context, without the files the oracle creates."""
    created = created_files(instance.patch)
    files = {p: c for p, c in instance.code_context.items() if p not in created}
    return RepoView(sorted(p for p in files if is_source(p, language)), files.get)


def git_view(repo: Repo, commit: str, language: str = "python") -> RepoView:
    """A clone at `commit`: `git ls-tree` for the paths, `git cat-file` for their content."""
    if repo.resolve(commit) is None:
        raise RepoUnavailable(f"{repo.path}: no commit {commit[:12]} (fetch it into the clone)")
    listing = repo.text("ls-tree", "-r", "--name-only", "-z", commit)
    paths = sorted(p for p in listing.split("\0") if p and is_source(p, language))

    def read(path: str) -> str | None:
        try:
            data = repo.blob(f"{commit}:{path}")
        except GitError:
            return None
        if data is None or b"\0" in data:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    return RepoView(paths, read)


def open_view(instance: Instance, snapshot: str, clones: dict[str, Path], language: str = "python") -> RepoView:
    """The view of `instance`, a repository of `language`: its own files (`snapshot="files"`)
    or its clone's (`"git"`).

    `clones` maps repository names to clones (reward.execution.snapshots.clone_map); a clone is
    found by "owner/name", then by "name", as the sandbox's snapshots find it.
    """
    if snapshot == "files":
        return files_view(instance, language)
    clone = clones.get(instance.repo) or clones.get(instance.repo.split("/")[-1])
    if clone is None:
        raise RepoUnavailable(f"{instance.repo}: no local clone (pass git=PATH with a clone of it)")
    return git_view(Repo(clone), instance.base_commit, language)


def changed_paths(instance: Instance, shown: Iterable[str]) -> list[str]:
    """The oracle's changed files that exist at the base commit and are shown: what a perfect
    localization names (files the oracle creates cannot be localized in a tree that lacks them)."""
    created = created_files(instance.patch)
    shown_set = set(shown)
    return [p for p in instance.oracle_new_content if p not in created and p in shown_set]
