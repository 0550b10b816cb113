"""Which environments a derived repository is tried in, and in which order: pure decisions over
what its snapshot declares (declared.py reads it; environments.derive_candidates turns each
pair into an EnvSpec; derivation.py builds and baselines them until one works).

A candidate is an interpreter and a requirement set.

    interpreters    those installed here that `requires-python` admits, ordered by what most
                    likely worked at the commit's date: the Python its pip-compiled files were
                    resolved with ("by Python 3.13"), then versions released by the date, those
                    out for MATURE_DAYS first (packages had wheels for them by then), then those
                    its CI / tox / nox / classifiers test, newest first (no date and nothing
                    declared: DEFAULT_PYTHON first). Not the oldest admitted:
                    a release of 2024 pins packages that its oldest Python no longer installs.
    requirement sets  what its own test command installs (tox's test environment, Hatch's test
                    or default one; the row's own files), its noxfile's and CI's install
                    lines, its test requirement files one by one, its PEP 735 test group,
                    Poetry's dev dependencies or a Pipfile's dev-packages, its requirements.txt (often the test and dev
                    pins of the repository, `-e .[extras]` with them), its dev files, everything
                    the older derivation read at once, and nothing (the project and the runner
                    alone). Docs, typing, lint and build files never make a set alone (docs pins
                    are what a test run needs least).
    plan            interpreter x set pairs by the sum of their places (the first interpreter with
                    the first set, then the first set on the second interpreter, then the second
                    set on the first), at most a few: each failed one costs a build.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date as Date
from datetime import timedelta
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from reward.execution import declared
from reward.execution.pythons import RELEASES

# An interpreter out this long before the commit had wheels of most packages by then.
MATURE_DAYS = 90
DEFAULT_PYTHON = "3.9"  # SWE-bench's for most repositories: first when nothing else decides
# Groups, extras and tox environments that are the test suite's.
TEST_NAMES = ("tests", "test", "testing")


@dataclass(frozen=True)
class RequirementSet:
    """Requirements (and extras of the project itself) that one declaration installs."""

    name: str  # where it comes from: "tox:testenv", "file:requirements/tests.txt", "group:tests", ...
    requirements: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    rank: int = 0  # lower first (plan)


# What each kind of declaration ranks, by how surely it is what the tests install.
RANKS = {"own": 0, "tox": 1, "file": 2, "group": 2, "base": 3, "dev": 4, "all": 5, "none": 6}


def interpreters(
    admits: str | None,
    here: Sequence[str],
    compiled: Sequence[str],
    tested: Sequence[str],
    when: str | None,
) -> list[str]:
    """The installed versions `admits` allows, best first (module docstring); when none is
    installed, the oldest version it admits that a machine could have (its build then fails as
    no_interpreter, counted), else DEFAULT_PYTHON."""
    try:
        spec = SpecifierSet(admits or "")
    except InvalidSpecifier:
        spec = SpecifierSet()
    allowed = [v for v in here if Version(f"{v}.0") in spec]
    if not allowed:
        return [next((v for v in RELEASES if Version(f"{v}.0") in spec), DEFAULT_PYTHON)]
    day = when[:10] if when else None
    mature = (Date.fromisoformat(day) - timedelta(days=MATURE_DAYS)).isoformat() if day else None

    def key(v: str) -> tuple[bool, bool, bool, bool, int]:
        released = day is None or RELEASES[v] <= day
        aged = mature is None or RELEASES[v] <= mature
        return (v not in compiled, not released, not aged, v not in tested, -int(v.split(".")[1]))

    ordered = sorted(allowed, key=key)
    if day is None and not compiled and not tested and DEFAULT_PYTHON in ordered:  # nothing decides
        ordered.remove(DEFAULT_PYTHON)
        ordered.insert(0, DEFAULT_PYTHON)
    # An interpreter released after the commit comes last, the oldest of them first (its
    # packages resolve as of its release: the closest to the commit's).
    early = [v for v in ordered if day is None or RELEASES[v] <= day or v in compiled]
    return early + sorted((v for v in ordered if v not in early), key=lambda v: RELEASES[v])


def ordered_sets(sets: Sequence[RequirementSet]) -> list[RequirementSet]:
    """By rank (stable), each distinct content once: the first name of it kept."""
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    out = []
    for s in sorted(sets, key=lambda s: s.rank):
        content = (tuple(sorted(s.requirements)), tuple(sorted(s.extras)))
        if content not in seen:
            seen.add(content)
            out.append(s)
    return out


def plan(pythons: Sequence[str], sets: Sequence[RequirementSet], limit: int) -> list[tuple[str, RequirementSet]]:
    """At most `limit` (interpreter, set) pairs, by the sum of their places, then the set's: the
    first set on the next interpreter before the next set (a pin the first interpreter cannot
    install is the commonest failure)."""
    pairs = [(i, j) for i in range(len(pythons)) for j in range(len(sets))]
    pairs.sort(key=lambda ij: (ij[0] + ij[1], ij[1]))
    return [(pythons[i], sets[j]) for i, j in pairs[:limit]]


def requirement_sets(snapshot: Path, own_files: tuple[str, ...]) -> list[RequirementSet]:
    """The snapshot's requirement sets, ordered (ordered_sets); always at least "none"."""
    read = declared.reader(snapshot)
    sets = [_file_set(read, f, "own") for f in own_files if (snapshot / f).is_file()]
    groups = declared.dependency_groups(snapshot)
    tox = _tox_set(snapshot, read, groups)
    sets += [tox] if tox else []
    for rel in declared.requirement_files(snapshot, own_files):
        kind = declared.file_kind(rel)
        if kind in ("test", "dev", "base"):
            sets.append(_file_set(read, rel, {"test": "file", "dev": "dev", "base": "base"}[kind]))
    sets += [RequirementSet(f"group:{g}", tuple(groups[g]), (), RANKS["group"]) for g in TEST_NAMES if g in groups]
    sets += [RequirementSet(f"group:{g}", tuple(groups[g]), (), RANKS["dev"]) for g in ("dev",) if g in groups]
    pip_dev, pip_extras = declared.pipfile_dev(snapshot)
    if pip_dev:
        sets.append(RequirementSet("pipfile:dev-packages", tuple(pip_dev), tuple(pip_extras), RANKS["group"]))
    for name, reqs in declared.poetry_groups(snapshot).items():  # poetry keeps pytest in dev
        rank = RANKS["group"] if name in ("dev", *TEST_NAMES) else RANKS["dev"]
        sets.append(RequirementSet(f"poetry:{name}", tuple(reqs), (), rank))
    for name, (deps, features) in declared.hatch_envs(snapshot).items():
        if name in ("hatch-test", "default", *TEST_NAMES):
            sets.append(RequirementSet(f"hatch:{name}", tuple(deps), tuple(features), RANKS["tox"]))
    for where, text in declared.install_lines(snapshot):
        more, more_extras = declared.requirement_lines(_with_text(read, "<install>", text), "<install>")
        sets.append(RequirementSet(f"install:{where}", tuple(dict.fromkeys(more)), tuple(more_extras), RANKS["file"]))
    reqs, extras = declared.test_requirements(snapshot, own_files)
    if reqs or extras:
        sets.append(RequirementSet("all", tuple(reqs), tuple(extras), RANKS["all"]))
    sets.append(RequirementSet("none", (), (), RANKS["none"]))
    return ordered_sets(sets)


def _with_text(read: declared.Reader, name: str, text: str) -> declared.Reader:
    """`read`, with `text` as the file `name` (an install line or tox's deps, read as a
    requirements file at the root: its `-r` includes followed from there)."""

    def reader(rel: str) -> str | None:
        return text if rel == name else read(rel)

    return reader


def _file_set(read: declared.Reader, rel: str, kind: str) -> RequirementSet:
    reqs, extras = declared.requirement_lines(read, rel)
    return RequirementSet(f"file:{rel}", tuple(dict.fromkeys(reqs)), tuple(dict.fromkeys(extras)), RANKS[kind])


def _tox_set(snapshot: Path, read: declared.Reader, groups: dict[str, list[str]]) -> RequirementSet | None:
    """What tox's test environment installs: the base [testenv], else the first test-named one."""
    envs = {e.name: e for e in declared.tox_envs(snapshot)}
    chosen = [e for e in envs.values() if e.name == "testenv" and (e.deps or e.groups or e.extras)]
    chosen += [e for name, e in envs.items() if name.startswith(("py", *TEST_NAMES)) and (e.deps or e.groups)]
    if not chosen:
        return None
    env = chosen[0]
    reqs: list[str] = []
    extras = list(env.extras)
    # Its deps as one requirements file at the root ("-r requirements/tests.txt" included from
    # there); a line with a substitution tox makes ({toxinidir}, {env:...}) is not readable here.
    deps = "\n".join(line for line in env.deps if "{" not in line)
    more, more_extras = declared.requirement_lines(_with_text(read, "<tox>", deps), "<tox>")
    reqs += more
    extras += more_extras
    for group in env.groups:
        reqs += groups.get(group, [])
    return RequirementSet(f"tox:{env.name}", tuple(dict.fromkeys(reqs)), tuple(dict.fromkeys(extras)), RANKS["tox"])
