"""Relevant unchanged files: the extra code context shown next to the files a PR changes.

The paper adds "relevant but unchanged" files to the context without a precise rule; ours is
deterministic and cheap enough to run on every PR:
1. Only Python is understood. Every non-test `.py` file the PR changes is a *seed*.
2. Candidates, in this order: (a) the repository modules a seed imports (absolute imports,
   relative imports, `from pkg import module`), resolved at the base commit; then (b) the
   modules that import a seed, found with `git grep -w <module name>` at the base commit and
   confirmed by reading their imports. Each group is sorted by path; test files and files
   the PR changes are never candidates.
3. The caller takes candidates in that order, skipping any that would push the context past
   its length budget, until it has K of them (K = `relevant_files`, 0 turns this off).
A module's dotted name is read from the tree: its directory chain up to the first directory
without an `__init__.py` is its package path (so `src/` layouts resolve too). Imports are read
with regular expressions rather than `ast`, so Python 2 files in old history parse as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import PurePosixPath

from data.git.diffs import is_test_path
from data.git.repo import Repo

_FROM_RE = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_IMPORT_RE = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.M)
# Candidates whose imports are read per seed when looking for importers; bounds the cost on
# huge packages where a module name (say "models") appears in hundreds of files.
MAX_IMPORTER_SCANS = 40


def module_names(paths: list[str]) -> dict[str, str]:
    """{dotted module name: path} of every `.py` file in a tree (first path in sort order wins)."""
    pyfiles = sorted(p for p in paths if p.endswith(".py"))
    packages = {str(PurePosixPath(p).parent) for p in pyfiles if p.endswith("/__init__.py")}
    names: dict[str, str] = {}
    for path in pyfiles:
        p = PurePosixPath(path)
        parts = [] if p.stem == "__init__" else [p.stem]
        d = p.parent
        while str(d) in packages:
            parts.insert(0, d.name)
            d = d.parent
        if parts:
            names.setdefault(".".join(parts), path)
    return names


def _package_of(path: str, names_by_path: dict[str, str]) -> str:
    """Dotted package containing `path` ("" at a root)."""
    name = names_by_path.get(path, "")
    return name if path.endswith("/__init__.py") else name.rpartition(".")[0]


def imported_files(source: str, path: str, names: dict[str, str], names_by_path: dict[str, str]) -> set[str]:
    """Repository files that `source` (the file at `path`) imports, relative imports included.

    `from pkg import mod` imports the module pkg/mod.py when there is one; the package's
    `__init__.py` counts only when none of the imported names is a module of it.
    """
    found: set[str] = set()
    for m in _IMPORT_RE.finditer(source):
        for item in m.group(1).split(","):
            module = item.split(" as ")[0].strip()
            if module in names:
                found.add(names[module])
    for m in _FROM_RE.finditer(source):
        dots, module, imported = m.group(1), m.group(2), m.group(3).strip("() \t\n")
        if dots:  # one dot = this file's package, each further dot one package up
            package = _package_of(path, names_by_path)
            parts = package.split(".") if package else []
            parts = parts[: max(len(parts) - (len(dots) - 1), 0)]
            module = ".".join(parts + ([module] if module else []))
        if not module:
            continue
        subs = [f"{module}.{n.split(' as ')[0].strip()}" for n in imported.split(",") if n.strip()]
        hits = {names[s] for s in subs if s in names}
        found |= hits or ({names[module]} if module in names else set())
    found.discard(path)
    return found


def relevant_candidates(repo: Repo, base: str, seeds: list[str], exclude: set[str]) -> Iterator[str]:
    """Candidate paths in rule order (see the module docstring); `exclude` = changed paths."""
    seeds = [s for s in seeds if s.endswith(".py") and not is_test_path(s)]
    if not seeds:
        return
    tree = repo.text("ls-tree", "-r", "--name-only", "-z", base).split("\0")
    # A newline in a path would break cat-file's line protocol; such files are never candidates.
    names = module_names([p for p in tree if p and "\n" not in p])
    names_by_path = {p: n for n, p in names.items()}

    def ok(p: str) -> bool:
        return p not in exclude and not is_test_path(p)

    imported: set[str] = set()
    for seed in seeds:
        blob = repo.blob(f"{base}:{seed}")
        if blob is not None:
            text = blob.decode("utf-8", "replace")
            imported |= imported_files(text, seed, names, names_by_path)
    yielded = sorted(p for p in imported if ok(p))
    yield from yielded
    yield from _importers(repo, base, seeds, names, names_by_path, set(yielded) | exclude, ok)


def _importers(
    repo: Repo,
    base: str,
    seeds: list[str],
    names: dict[str, str],
    names_by_path: dict[str, str],
    skip: set[str],
    ok: Callable[[str], bool],
) -> Iterator[str]:
    targets = {s for s in seeds if s in names_by_path}
    words = sorted({names_by_path[s].rpartition(".")[2] for s in targets})
    if not words:
        return
    args = ["grep", "-l", "-w", "-F"]
    for w in words:
        args += ["-e", w]
    out = repo.run(*args, base, "--", "*.py", check=False).decode("utf-8", "replace")
    paths = sorted({line.split(":", 1)[1] for line in out.splitlines() if ":" in line} & set(names_by_path))
    scanned = 0
    for path in paths:
        if path in skip or not ok(path):
            continue
        if scanned >= MAX_IMPORTER_SCANS:
            return
        scanned += 1
        blob = repo.blob(f"{base}:{path}")
        if blob is None:
            continue
        text = blob.decode("utf-8", "replace")
        if imported_files(text, path, names, names_by_path) & targets:
            yield path
