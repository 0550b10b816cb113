"""The rooms and layers docs/architecture.md draws, held for every module of the five packages,
with every import counted: top-level, inside functions and under TYPE_CHECKING.

Layers, bottom to top: conf, data, reward, learner, actors; above them the commands (COMMANDS:
`python -m` modules that start what lives above their own package), train.py, bench/ and the
tests. A module imports its own layer or lower ones; no import cycle between modules, nor
between rooms (subpackages: an arrow between two rooms points one way); nothing imports a command; an import inside a function says why on its line or the line above (a heavy
or optional dependency: with no cycle even counting them, none can be dodging one)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("conf", "data", "reward", "learner", "actors")
# Commands that reach above their package's layer (a Ray session, the test-runner pool, an
# engine); every one is run, never imported.
COMMANDS = {
    "data.build",
    "data.demo.__main__",
    "data.gharchive",
    "data.inject.__main__",
    "data.swebench_exec",
    "data.validate",
    "reward.execute",
}
MAX_TOP_LEVEL = {"actors": 12, "data": 12}
NOT_MODULES = ("data/demo/src/",)  # the demo set's sources: code of fictional repositories


def _modules() -> dict[str, Path]:
    out = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if any(str(rel).startswith(p) for p in NOT_MODULES):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an imported name lives in (a package's attribute -> the package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[ast.stmt, set[str], bool]]:
    """(statement, project modules it imports, whether it runs inside a function)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    inside = {
        id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(f)
    }
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        found = {m for n in names if (m := _resolve(n)) and m != module}
        out.append((node, found, id(node) in inside))
    return out


EDGES = {m: {t for _, targets, _ in _imports(m) for t in targets} for m in MODULES}


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules():
    assert _cycles(EDGES) == []


def _room(module: str) -> str:
    """A module's room: its subpackage (actors.driver, reward.kinds); a module at the top of a
    package is a room of its own (data.schema), as is a package's __init__ (reward)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[module].name == "__init__.py" else module


def test_an_arrow_between_rooms_points_one_way():
    rooms: dict[str, set[str]] = {_room(m): set() for m in MODULES}
    for module, targets in EDGES.items():
        rooms[_room(module)] |= {_room(t) for t in targets} - {_room(module)}
    assert _cycles(rooms) == []


def test_the_cycle_check_finds_a_cycle():
    """The check itself can fail: a two-module loop added to the graph is reported."""
    edges = {m: set(targets) for m, targets in EDGES.items()}
    edges["conf.errors"].add("conf.io")  # conf.io imports conf.errors
    assert _cycles(edges) == [["conf.errors", "conf.io"]]


@pytest.mark.parametrize("package", LAYERS)
def test_a_module_imports_its_layer_or_lower_ones(package):
    upward = {
        m: sorted(t for t in EDGES[m] if _layer(t) > _layer(m))
        for m in MODULES
        if m.split(".")[0] == package and m not in COMMANDS
    }
    assert {m: t for m, t in upward.items() if t} == {}


def test_nothing_imports_a_command():
    assert {m: sorted(EDGES[m] & COMMANDS) for m in MODULES if EDGES[m] & COMMANDS} == {}
    for command in COMMANDS:
        assert "__main__" in MODULES[command].read_text(), f"{command} is not run as a command"


def _says_why(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's line, or above it or above the run of imports it ends."""
    if "#" in lines[node.end_lineno - 1]:
        return True
    row = node.lineno - 2
    while row >= 0 and lines[row].strip().startswith(("import ", "from ")):
        row -= 1
    return row >= 0 and lines[row].strip().startswith("#")


def test_an_import_inside_a_function_says_why():
    silent = []
    for module, path in MODULES.items():
        lines = path.read_text().splitlines()
        for node, _, inside in _imports(module):
            if inside and not _says_why(lines, node):
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert silent == []


@pytest.mark.parametrize("package", sorted(MAX_TOP_LEVEL))
def test_a_crowded_room_has_subpackages(package):
    top = sorted(p.name for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL[package], top


def test_one_name_per_module_and_per_class():
    stems = Counter(p.stem for p in MODULES.values() if p.stem not in ("__init__", "__main__"))
    assert {s: n for s, n in stems.items() if n > 1} == {}
    classes = Counter(
        node.name
        for path in MODULES.values()
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef)
    )
    assert {c: n for c, n in classes.items() if n > 1} == {}


def test_the_driver_reads_on_one_screen():
    """The step loop is the documentation (issue 12): new capabilities go into components and
    registries, not into train.py."""
    lines = len((ROOT / "train.py").read_text().splitlines())
    assert lines <= 200, f"train.py has {lines} lines: move the new logic into a component"
