"""The rooms and layers docs/architecture.md draws, held for every module of the five packages,
with every import counted: top-level, inside functions and under TYPE_CHECKING.

A room is a subpackage (reward.execution, actors.driver) or a module at the top of a package
(data.schema); LAYERS places every room in a layer, bottom to top, and a module imports its own
layer or lower ones. So the test-runner harness (reward.execution) sits above the records it
reads (data.schema, data.paths, data.patching, data.git) and below the data pipelines that run
tests with it (data.bugs, data.swebench_exec, data.demo; data.validate and data.inject among
the commands). Also: every room is placed (a new room is a line here), no import cycle between
modules nor between rooms (an arrow between two rooms points one way), nothing imports a command,
and an import inside a function says why on its line or the line above (a heavy or optional
dependency: with no cycle even counting them, none can be dodging one)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("conf", "data", "reward", "learner", "actors")
# Every room, in layers from the bottom: (the layer's name, its rooms).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the config schemas and the small shared tools; nothing of the project below them
    (
        "conf",
        (
            "conf",
            "conf.config",
            "conf.device",
            "conf.errors",
            "conf.eval",
            "conf.io",
            "conf.logs",
            "conf.overrides",
            "conf.progress",
            "conf.reference",
            "conf.registry",
            "conf.runtime",
        ),
    ),
    # what every other room reads: an instance, its paths and patches, a clone, shards, the prompt
    ("records", ("data", "data.git", "data.patching", "data.paths", "data.prompt", "data.schema", "data.shards")),
    # instances from repositories, without running them
    ("mining", ("data.agentless", "data.context", "data.fixtures", "data.inspect", "data.mining")),
    # the SWE-RL reward, pure Python: it never runs the code it scores
    (
        "scorer",
        (
            "reward",
            "reward.apply",
            "reward.bug_reward",
            "reward.core",
            "reward.oracle",
            "reward.parse",
            "reward.patches",
            "reward.rerank",
            "reward.score",
            "reward.screen",
            "reward.similarity",
            "reward.spec",
            "reward.workers",
        ),
    ),
    # running tests: the sandbox, the runner, the environments, the test-runner pool
    ("execution", ("reward.execution",)),
    # what runs tests on the harness, or reads from a room that does (data.loader: the demo set,
    # which data.demo rebuilds with the harness)
    (
        "tested",
        ("data.bugs", "data.demo", "data.loader", "data.swebench_exec", "data.swebench_js", "reward.kinds"),
    ),
    # the DeepSpeed side
    (
        "learner",
        (
            "learner",
            "learner.batch",
            "learner.checkpoint",
            "learner.group",
            "learner.hub",
            "learner.logprobs",
            "learner.memory",
            "learner.models",
            "learner.objectives",
            "learner.plot",
            "learner.rng",
            "learner.segments",
            "learner.sft",
            "learner.shared_prefix",
            "learner.transport",
            "learner.worker",
        ),
    ),
    # Ray actors and the driver's components
    (
        "actors",
        (
            "actors",
            "actors.agent",
            "actors.cluster",
            "actors.control",
            "actors.driver",
            "actors.eval",
            "actors.evaluate",
            "actors.observe",
            "actors.plugins",
            "actors.replay",
            "actors.rollout",
        ),
    ),
    # `python -m` commands of data/ and reward/ that start a Ray session (actors.cluster.join)
    (
        "commands",
        (
            "data.build",  # and the --context model's engines (actors.rollout)
            "data.gharchive",
            "data.inject",  # and the model injector's engines (actors.rollout)
            "data.validate",
            "reward.execute",
        ),
    ),
)
# Modules that are run and imported too: the rest of those that are run are commands
RUN_AND_IMPORTED = {
    "actors.cluster.reaper",  # join starts it as the run's reaper process; join and quiet use its helpers
    "learner.plot",  # the run log draws the curves at the end; `python -m learner.plot` a saved run's
    "reward.execution.check",  # every test runner checks its node at start; `python -m` checks one by hand
}
MAX_TOP_LEVEL = {"actors": 12, "data": 12}
NOT_MODULES = ("data/demo/src/",)  # the demo set's sources: code of fictional repositories


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
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


def _room(module: str) -> str:
    """A module's room: its subpackage (actors.driver, reward.execution: a new module there is in
    it); a module at the top of a package is a room of its own (data.schema), as is a package's
    __init__ (reward)."""
    parts = module.split(".")
    package = module in MODULES and MODULES[module].name == "__init__.py"
    return ".".join(parts[:2]) if len(parts) > 2 or package else module


LAYER = {room: i for i, (_, rooms) in enumerate(LAYERS) for room in rooms}
COMMANDS = set(LAYERS[-1][1])


def _layer(module: str) -> int:
    return LAYER[_room(module)]


def _unplaced(modules: list[str]) -> list[str]:
    """The rooms of these modules that LAYERS does not place."""
    return sorted({_room(m) for m in modules} - set(LAYER))


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


def test_every_room_is_placed_once():
    placed = [room for _, rooms in LAYERS for room in rooms]
    assert sorted(r for r, n in Counter(placed).items() if n > 1) == []
    assert _unplaced(list(MODULES)) == []
    assert sorted(set(placed) - {_room(m) for m in MODULES}) == []  # no room without a module


def test_the_placement_check_finds_a_new_room():
    """The check itself can fail: a new top-level module or subpackage is a room to place, while
    a new module of a room is placed with it."""
    assert _unplaced([*MODULES, "data.upload", "reward.checks.lint"]) == ["data.upload", "reward.checks"]


@pytest.mark.parametrize("name", ["cgroups", "check", "repos", "userns"])
def test_a_new_execution_module_is_in_the_execution_room(name):
    assert _room(f"reward.execution.{name}") == "reward.execution"
    assert LAYERS[_layer(f"reward.execution.{name}")][0] == "execution"


def _upward(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each module's imports of a higher layer than its own."""
    upward = {m: sorted(t for t in targets if _layer(t) > _layer(m)) for m, targets in edges.items()}
    return {m: t for m, t in upward.items() if t}


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS])
def test_a_module_imports_its_layer_or_lower_ones(layer):
    assert _upward({m: t for m, t in EDGES.items() if LAYERS[_layer(m)][0] == layer}) == {}


def test_the_layer_check_finds_an_upward_import():
    """The check itself can fail: the harness importing the bugs' proof that runs on it."""
    edges = {m: set(targets) for m, targets in EDGES.items()}
    edges["reward.execution.runner"].add("data.bugs.proof")
    assert _upward(edges) == {"reward.execution.runner": ["data.bugs.proof"]}


def _runs(module: str) -> bool:
    path = MODULES[module]
    return path.name == "__main__.py" or 'if __name__ == "__main__":' in path.read_text()


def test_nothing_imports_a_command():
    """A command is a module that is run (`__main__`); each room of the top layer has one."""
    commands = {m for m in MODULES if _runs(m)} - RUN_AND_IMPORTED
    assert {m: sorted(EDGES[m] & commands) for m in MODULES if EDGES[m] & commands} == {}
    for room in COMMANDS:
        assert any(_runs(m) for m in MODULES if _room(m) == room), f"{room} is not run as a command"
    assert sorted(m for m in RUN_AND_IMPORTED if not _runs(m)) == []


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
    """The step loop is the documentation: new capabilities go into components and
    registries, not into train.py."""
    lines = len((ROOT / "train.py").read_text().splitlines())
    assert lines <= 200, f"train.py has {lines} lines: move the new logic into a component"
