"""The files a pull request changes, read from git: one `FileChange` per changed path.

Two git calls per PR: `diff --raw -z` gives the exact paths, blob ids and modes (no quoting
ambiguity), `diff` gives the patch text; git emits both in the same order, one `diff --git`
section per raw entry, so they are zipped. Renames are detected (`-M`), so a moved file
is one compact section rather than a delete plus an add.

Also here: the path rules that decide what is a test file and what is a programming-language
file. They are heuristics (the paper does not define them); the rules are written out below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from data.git.repo import GitError, Repo

_DIFF_ARGS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/")
_SECTION_RE = re.compile(rb"^diff --git ", re.MULTILINE)
_TEXT_MODES = ("100644", "100755")  # regular files; 120000 = symlink, 160000 = submodule

# A path is a test file when a directory on it has one of these names, or its file name
# matches one of the patterns (pytest, unittest, Go, Jest/Mocha, RSpec conventions).
TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs"})
# JavaScript and TypeScript sources (one runtime, one family of test runners).
JS_EXTENSIONS = frozenset({".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts"})
# The folders whose scripts JavaScript's runners take as tests by default (Mocha: test/*.js, Jest:
# __tests__/); "testing" is not one: a library's testing/ folder is code it ships.
JS_TEST_DIRS = frozenset({"test", "tests", "spec", "__tests__"})
_TEST_NAME_RE = re.compile(
    r"^(test_.*|.*_tests?\.[^.]+|.*\.(test|spec)\.[^.]+|.*_spec\.rb|conftest\.py|tests?\.(py|[cm]?[jt]sx?))$"
)
# Extensions of programming-language source files; a PR touching none of them (docs, config,
# data only) is not a coding task.
CODE_EXTENSIONS = frozenset(
    [
        ".py",
        ".pyx",
        ".pxd",
        ".pyi",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hh",
        ".hpp",
        ".hxx",
        ".cu",
        ".m",
        ".mm",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".groovy",
        ".go",
        ".rs",
        ".rb",
        ".php",
        ".cs",
        ".fs",
        ".swift",
        ".js",
        ".jsx",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".vue",
        ".svelte",
        ".lua",
        ".r",
        ".jl",
        ".dart",
        ".hs",
        ".ml",
        ".mli",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".cljs",
        ".pl",
        ".pm",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".sql",
        ".f",
        ".f90",
        ".zig",
        ".nim",
        ".v",
        ".sv",
        ".vhd",
        ".elm",
        ".sol",
        ".tf",
    ]
)


def is_test_path(path: str) -> bool:
    p = PurePosixPath(path.lower())
    return any(part in TEST_DIRS for part in p.parts[:-1]) or bool(_TEST_NAME_RE.match(p.name))


def is_code_path(path: str) -> bool:
    return PurePosixPath(path.lower()).suffix in CODE_EXTENSIONS


@dataclass(frozen=True)
class FileChange:
    status: str  # git's letter: A(dded), D(eleted), M(odified), R(enamed), C(opied), T(ype change)
    old_path: str | None  # None when the PR adds the file
    new_path: str | None  # None when the PR deletes the file
    old_blob: str | None
    new_blob: str | None
    old_mode: str
    new_mode: str
    diff: bytes  # this file's `diff --git` section, raw bytes (may not be UTF-8)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(p for p in (self.old_path, self.new_path) if p is not None)

    @property
    def is_test(self) -> bool:
        """A test change when every path it touches is a test path (a rename out of tests/ is code)."""
        return all(is_test_path(p) for p in self.paths)

    @property
    def is_code(self) -> bool:
        return any(is_code_path(p) for p in self.paths)

    @property
    def is_binary(self) -> bool:
        """Binary contents, a symlink or a submodule: nothing a text patch can express."""
        modes_ok = all(m in _TEXT_MODES or m == "000000" for m in (self.old_mode, self.new_mode))
        head = self.diff.split(b"\n@@", 1)[0]
        return not modes_ok or b"\nBinary files " in head or b"\nGIT binary patch" in head

    def counts(self) -> tuple[int, int]:
        """(hunks, changed lines) of this file's section."""
        hunks = lines = 0
        for line in self.diff.split(b"\n"):
            if line.startswith(b"@@"):
                hunks += 1
            elif line[:1] in (b"+", b"-") and not line.startswith((b"+++ ", b"--- ")):
                lines += 1
        return hunks, lines


def _parse_raw(raw: bytes) -> list[tuple[str, str, str, str, str, str | None, str | None]]:
    """`git diff --raw -z` -> [(status, old_mode, new_mode, old_blob, new_blob, old_path, new_path)]."""
    fields = raw.split(b"\0")
    out = []
    i = 0
    while i < len(fields) and fields[i]:
        meta = fields[i].decode().lstrip(":").split()
        old_mode, new_mode, old_blob, new_blob, status = meta[0], meta[1], meta[2], meta[3], meta[4][0]
        if status in ("R", "C"):
            old_path, new_path = fields[i + 1], fields[i + 2]
            i += 3
        else:
            old_path = new_path = fields[i + 1]
            i += 2
        old = old_path.decode("utf-8", "surrogateescape")
        new = new_path.decode("utf-8", "surrogateescape")
        out.append(
            (
                status,
                old_mode,
                new_mode,
                old_blob,
                new_blob,
                None if status == "A" else old,
                None if status == "D" else new,
            )
        )
    return out


def changed_files(repo: Repo, base: str, head: str) -> list[FileChange]:
    """Every file that differs between `base` and `head`, with its patch section."""
    entries = _parse_raw(repo.run("diff", "--raw", "-z", "--no-abbrev", "-M", base, head))
    patch = repo.run("diff", *_DIFF_ARGS, base, head)
    starts = [m.start() for m in _SECTION_RE.finditer(patch)] + [len(patch)]
    # A type change (file <-> symlink) is one raw entry but two sections (delete, then add).
    needed = [2 if e[0] == "T" else 1 for e in entries]
    if sum(needed) != len(starts) - 1:
        raise GitError(
            f"{repo.path}: {base[:12]}..{head[:12]}: {len(entries)} raw entries but {len(starts) - 1} diff sections"
        )
    changes, k = [], 0
    for (st, om, nm, ob, nb, op, np_), n in zip(entries, needed, strict=True):
        changes.append(
            FileChange(
                status=st,
                old_path=op,
                new_path=np_,
                old_mode=om,
                new_mode=nm,
                old_blob=None if set(ob) == {"0"} else ob,
                new_blob=None if set(nb) == {"0"} else nb,
                diff=patch[starts[k] : starts[k + n]],
            )
        )
        k += n
    return changes
