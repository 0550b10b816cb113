"""The repository's own tests that exercise a set of edited modules: the Agentless-Mini
regression fallback (actors/eval/agentless_sandbox.py) for instances without PASS_TO_PASS tests.

A test file is selected when it imports an edited module directly or through the project's own
modules: the import graph of the repository view's Python sources is read with data/context/imports.py's
import reader (absolute, relative and `from pkg import module` imports; regular expressions, so
Python 2 files parse too), and each test file's distance is one more than the nearest module it
imports, counted in import steps back from the edited modules. So `import requests` in
test_requests.py selects it when `requests/models.py` is edited, because `requests/__init__.py`
imports `.models`. Only pytest's own file names count as test files (`test_*.py`,
`*_test.py`); helpers and conftest.py files run with the tests that use them. The nearest
`MAX_TEST_FILES` are kept (distance, then path): in a project whose package imports every
module, every test would otherwise run for every candidate.

A JavaScript/TypeScript repository (`language="javascript"`, its environment's runner being a
JavaScript one) is read the same way over its JS/TS sources with data/context/js_imports.py
(require, import, dynamic import and re-exports; relative specifiers resolved to files, and the
package's own name); its test files are those the caller's `is_test` says are (the harness's JS
rules, reward/execution/jsenv.is_js_test_file, which this layer cannot import). The same rules
otherwise: helpers under a test folder are neither tests nor followed, nearest first, the limit.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath

from data.agentless.repo_view import RepoView
from data.context import js_imports
from data.context.imports import imported_files, module_names
from data.git.diffs import is_test_path

MAX_TEST_FILES = 8
_PYTEST_FILE_RE = re.compile(r"^(test_.*|.*_test)\.py$")


def is_test_file(path: str) -> bool:
    """A file pytest collects by its default name patterns."""
    return bool(_PYTEST_FILE_RE.match(PurePosixPath(path).name))


def regression_test_files(
    view: RepoView,
    edited: Iterable[str],
    limit: int = MAX_TEST_FILES,
    language: str = "python",
    is_test: Callable[[str], bool] = is_test_file,
) -> list[str]:
    """The view's test files that import any of `edited` (see the module docstring), nearest first."""
    targets = {p for p in edited if p in view.files}
    if not targets:
        return []
    importers, tests = _js_graph(view, is_test) if language == "javascript" else _python_graph(view, is_test)
    distance = dict.fromkeys(targets, 0)
    queue = deque(sorted(targets))
    while queue:
        module = queue.popleft()
        for importer in sorted(importers.get(module, ())):
            if importer not in distance:
                distance[importer] = distance[module] + 1
                queue.append(importer)
    reached = {
        t: min(distance[m] for m in imports if m in distance)
        for t, imports in tests.items()
        if imports & distance.keys()
    }
    return sorted(reached, key=lambda t: (reached[t], t))[:limit]


# module -> the project's modules that import it; test file -> the modules it imports
Graph = tuple[dict[str, set[str]], dict[str, set[str]]]


def _graph(
    view: RepoView, is_test: Callable[[str], bool], sources: Iterable[str], imports_of: Callable[[str, str], set[str]]
) -> Graph:
    importers: dict[str, set[str]] = {}
    tests: dict[str, set[str]] = {}
    for path in sources:
        if is_test_path(path) and not is_test(path):
            continue
        source = view.read(path)
        if source is None:
            continue
        imports = imports_of(source, path)
        if is_test(path):
            tests[path] = imports
        else:
            for module in imports:
                importers.setdefault(module, set()).add(path)
    return importers, tests


def _python_graph(view: RepoView, is_test: Callable[[str], bool]) -> Graph:
    names = module_names(view.files)
    names_by_path = {p: n for n, p in names.items()}
    sources = [p for p in view.files if p.endswith(".py")]
    return _graph(view, is_test, sources, lambda source, path: imported_files(source, path, names, names_by_path))


def _js_graph(view: RepoView, is_test: Callable[[str], bool]) -> Graph:
    files = set(view.files)
    own = js_imports.package_name(view.reader)
    sources = [p for p in view.files if p.endswith(js_imports.JS_SUFFIXES)]
    return _graph(
        view, is_test, sources, lambda source, path: js_imports.imported_files(source, path, files, view.reader, own)
    )
