"""The project files a JavaScript or TypeScript file imports: what the Agentless regression
fallback (data/agentless/regression_tests.py) follows from a test file back to the edited modules.

Read with regular expressions, as data/context/imports.py reads Python (no parser for every
dialect: CommonJS, ES modules, TypeScript, JSX). A module specifier is taken from

    require('x')   import('x')   import 'x'   import ... from 'x'   export ... from 'x'

(`from 'x'` alone covers both import and export forms, their names spread over lines or not;
TypeScript's `import type` too). A relative specifier ('./a', '../lib') resolves against the
importing file's folder as node and bundlers resolve it: the path itself, then with each of
JS_SUFFIXES, then its folder's package.json `main` and `index` with each suffix; a `.js` that
is not in the tree is tried as `.ts`/`.tsx` (TypeScript's ES-module imports name the emitted
file). A bare specifier counts only when it is the repository's own package name (its root
package.json's `name`: a test that requires its package by name); packages from node_modules
are not the project's. A specifier inside a comment or a string that merely looks like one may
add an edge: harmless, as it must still name a file of the tree.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Collection

JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
# An emitted file's suffix -> the TypeScript sources it may come from.
_TS_SOURCES = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
_SPEC = r"""(['"`])([^'"`\n]+)\1"""
_SPECIFIER_RES = (
    re.compile(r"\brequire\s*\(\s*" + _SPEC),
    re.compile(r"\bimport\s*\(\s*" + _SPEC),
    re.compile(r"\bimport\s*" + _SPEC),
    re.compile(r"\bfrom\s*" + _SPEC),
)


def specifiers(source: str) -> list[str]:
    """The module specifiers `source` names, in order of first appearance."""
    found: dict[str, int] = {}
    for pattern in _SPECIFIER_RES:
        for m in pattern.finditer(source):
            found.setdefault(m.group(2), m.start())
    return sorted(found, key=found.__getitem__)


def resolve(
    specifier: str, importer: str, files: Collection[str], read: Callable[[str], str | None], own_name: str | None
) -> str | None:
    """The tree's file `specifier` names from the file at `importer`, or None (a package, a file
    outside the tree, a bare name other than the repository's own)."""
    if specifier == own_name or (own_name and specifier.startswith(own_name + "/")):
        target = specifier[len(own_name) :].lstrip("/")
    elif specifier.startswith(("./", "../")) or specifier in (".", ".."):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(importer), specifier))
    else:
        return None
    if target.startswith("../"):
        return None
    target = "" if target == "." else target
    return _as_file(target, files) or _as_folder(target, files, read)


def _as_file(target: str, files: Collection[str]) -> str | None:
    if not target:
        return None
    if target in files:
        return target
    for suffix in JS_SUFFIXES:
        if target + suffix in files:
            return target + suffix
    stem, suffix = posixpath.splitext(target)
    for source in _TS_SOURCES.get(suffix, ()):
        if stem + source in files:
            return stem + source
    return None


def _as_folder(target: str, files: Collection[str], read: Callable[[str], str | None]) -> str | None:
    prefix = f"{target}/" if target else ""
    main = _package_field(read(prefix + "package.json"), "main")
    if main:
        hit = _as_file(posixpath.normpath(prefix + main), files)
        if hit is None:  # `main` names a folder: its index
            hit = _index(posixpath.normpath(prefix + main) + "/", files)
        if hit is not None:
            return hit
    return _index(prefix, files)


def _index(prefix: str, files: Collection[str]) -> str | None:
    return next((prefix + "index" + s for s in JS_SUFFIXES if prefix + "index" + s in files), None)


def package_name(read: Callable[[str], str | None]) -> str | None:
    """The repository's own package name (its root package.json's `name`), or None."""
    return _package_field(read("package.json"), "name")


def _package_field(text: str | None, key: str) -> str | None:
    if not text:
        return None
    try:
        package = json.loads(text)
    except ValueError:
        return None
    value = package.get(key) if isinstance(package, dict) else None
    return value if isinstance(value, str) and value else None


def imported_files(
    source: str, path: str, files: Collection[str], read: Callable[[str], str | None], own_name: str | None
) -> set[str]:
    """The tree's files (`files`) that `source`, the file at `path`, imports."""
    hits = (resolve(s, path, files, read, own_name) for s in specifiers(source))
    return {h for h in hits if h is not None and h != path}
