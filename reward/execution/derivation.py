"""A derived environment, found by trying: each candidate (environments.derive_candidates) is
built and its baseline run until one runs the repository's tests, and every attempt is recorded.

    Deriver(cfg).derive(instance, snapshot, tests)  ->  Derivation

An attempt builds the candidate's environment (cached: a later run of the same spec finds it)
and runs the tests once in the sandbox, as every test run (runner.py: the guard, the canaries
and the recorder as always), with the repository's own selection and options (testcommand.py).
It fails at a stage:

    snapshot      the commit could not be checked out (no_snapshot): no other candidate is tried
                  (nor after a baseline that ran out of its wall clock: each would cost as much)
    interpreter   no interpreter of that version here (no_interpreter)
    build         the environment did not resolve, install or build (env_failed)
    baseline      the tests did not run (pytest could not start or collect: no_report, a
                  timeout: a run out of its wall clock runs once more with it doubled, walls.py,
                  before it counts), or ran and `unusable` says why they do not count: no test
                  collected, most tests erroring (an import that fails at collection), no test
                  passing. A JavaScript baseline whose test files all failed to load (a test
                  file importing a module only the fix adds) is asked again with the fix

After a baseline whose tests could not import a package, the candidates of the same requirement
set go last (another interpreter would miss the package too); after a failed build of the
snapshot itself, those of the same interpreter. The first attempt whose baseline counts is
chosen; when none does, the one with the most passing tests (its baseline fails later, with its
reason, as before). At most `limit` baselines run (each may cost a wall clock) among at most
twice as many candidates (one that fails to build costs seconds).

The record (Derivation.record: the repository, commit, chosen interpreter and requirement set,
the test command, every attempt with its error's first lines and seconds, the baseline's counts,
seconds per stage, and the chosen baseline run's own seconds, which the walls of data.inject's
later runs follow: walls.py) is what data.inject and data.validate write as `_environments.json`
beside their manifest (write_records), with one line per repository on the console (summary).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from conf.config import ExecutionConfig
from conf.io import write_text
from data.schema import Instance
from reward.execution import environments, walls
from reward.execution.environments import EnvSpec, derive_candidates
from reward.execution.runner import LOAD_FAILURE, Runner, TestJob
from reward.execution.testcommand import TestCommand, ignored, ignored_by, own_command

log = logging.getLogger(__name__)

ATTEMPTS = 4  # baselines run per derivation, at most: each may cost a whole wall clock
RECORDS = "_environments.json"  # beside a command's _manifest.json
# The stage at which a run of each status failed (any other: the baseline's).
STAGES = {"no_interpreter": "interpreter", "env_failed": "build", "error": "build", "no_snapshot": "snapshot"}
_ERROR_LINES, _ERROR_CHARS = 6, 800  # of each attempt's error, in the record


@dataclass(frozen=True)
class Attempt:
    python: str
    requirements: str  # the requirement set's name (candidates.RequirementSet.name)
    stage: str  # "ok", or where it failed: "snapshot", "interpreter", "build", "baseline"
    error: str = ""  # the first lines of why
    seconds: float = 0.0  # the whole attempt
    build_s: float = 0.0  # of which building the environment (0: cached)
    counts: dict[str, int] = field(default_factory=dict)  # the baseline's outcomes: passed, failed, error, skipped
    run_s: float = 0.0  # the baseline run's own seconds, in the sandbox (later runs' walls follow it: walls.py)
    wall_s: float = 0.0  # the wall clock that run had (doubled once after a timeout)
    notes: tuple[str, ...] = ()  # how its build read the snapshot's metadata otherwise (environments.REPAIRED)


@dataclass(frozen=True)
class Derivation:
    repo: str
    commit: str
    spec: EnvSpec  # the chosen candidate's
    requirements: str  # its requirement set's name
    ok: bool  # its baseline counts (unusable said nothing)
    attempts: tuple[Attempt, ...]
    command: TestCommand
    tests: int  # test files the baseline ran

    def record(self) -> dict[str, Any]:
        chosen = next((a for a in self.attempts if a.stage == "ok"), None)
        return {
            "repo": self.repo,
            "commit": self.commit,
            "ok": self.ok,
            "python": self.spec.python,
            "requirements": self.requirements,
            "command": asdict(self.command),
            "tests": self.tests,
            "baseline": (chosen or self._best()).counts if self.attempts else {},
            "seconds": {
                "build": round(sum(a.build_s for a in self.attempts), 1),
                "baseline": round(sum(a.seconds - a.build_s for a in self.attempts), 1),
            },
            "attempts": [asdict(a) for a in self.attempts],
            "environment": json.loads(self.spec.to_json()),
        }

    @property
    def baseline_s(self) -> float | None:
        """What the chosen baseline run took (None: none counted): the later runs' walls follow it."""
        chosen = next((a for a in self.attempts if a.stage == "ok"), None)
        return chosen.run_s if chosen is not None and chosen.run_s > 0 else None

    def summary(self) -> str:
        """One line for the console: the repository, the choice, the baseline, the attempts."""
        counts = self.record()["baseline"]
        tried = len(self.attempts)
        head = f"[env] {self.repo}@{self.commit[:10]}: " + ("ok" if self.ok else "FAILED")
        choice = f"python {self.spec.python}, {self.requirements}"
        base = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("passed", "failed", "error"))
        seconds = sum(a.seconds for a in self.attempts)
        last = (
            ""
            if self.ok or not self.attempts
            else f"; last: {self.attempts[-1].stage}: {_first(self.attempts[-1].error)}"
        )
        return f"{head}, {choice}; baseline {base}; {tried} attempt{'s' * (tried != 1)}, {seconds:.0f} s{last}"

    def _best(self) -> Attempt:
        return max(self.attempts, key=lambda a: (a.counts.get("passed", 0), sum(a.counts.values())))


def unusable(counts: dict[str, int], need_passing: bool = True) -> str | None:
    """Why a baseline run whose report was read does not count, or None when it does.
    `need_passing`: a test must pass (a repository's suite; an instance's tests before its fix
    may all fail, data.validate's)."""
    ran = sum(counts.get(k, 0) for k in ("passed", "failed", "error"))
    if ran == 0:
        return "no test was collected"
    if counts.get("error", 0) * 2 > ran:
        return f"{counts['error']} of {ran} tests errored (collection or fixtures)"
    if need_passing and counts.get("passed", 0) == 0:
        return f"no test passes ({counts.get('failed', 0)} failed, {counts.get('error', 0)} errored)"
    return None


# A baseline whose tests could not import a package: its requirement set lacks it.
OWN_BUILD = environments.SNAPSHOT_BUILD  # the error of a failed build of the snapshot itself
_MISSING = re.compile(r"ModuleNotFoundError|No module named|ImportError")


def reordered(pending: Sequence[tuple[str, EnvSpec]], failed: Attempt) -> list[tuple[str, EnvSpec]]:
    """The candidates left after `failed`: those of its requirement set last when its tests could
    not import a package (another interpreter would miss it too: rich's tox set lacked attrs);
    those of its interpreter last when the snapshot's own build failed (the build backend of that
    interpreter's date, whatever the set: jsonschema 3.2.0's on 3.7 and 3.6)."""
    if failed.stage == "baseline" and _MISSING.search(failed.error):
        return sorted(pending, key=lambda c: c[0] == failed.requirements)  # stable: the rest keep their order
    if failed.stage == "build" and OWN_BUILD in failed.error:
        return sorted(pending, key=lambda c: c[1].python == failed.python)
    return list(pending)


def select_tests(tests: Sequence[str], paths: Sequence[str], args: Sequence[str] = ()) -> tuple[str, ...]:
    """The test files under the repository's own selection (`paths`: folders or files); all of
    them when it names none, or none of them is under it; less those its command's options
    (`args`: TestCommand.args) ignore (--ignore, --ignore-glob), which pytest applies only to
    the folders it walks, not to the files the harness names."""
    left, globs = ignored(list(args))
    tests = [t for t in tests if not ignored_by(t, left, globs)]
    if not paths:
        return tuple(tests)
    roots = [PurePosixPath(p) for p in paths]
    chosen = tuple(t for t in tests if any(r == PurePosixPath(t) or r in PurePosixPath(t).parents for r in roots))
    return chosen or tuple(tests)


class Deriver:
    """Derives environments on this node (its builds land in the node's cache, where the test
    pool's runners find them), keeping every Derivation in `derivations`."""

    def __init__(self, cfg: ExecutionConfig, limit: int = ATTEMPTS, need_passing: bool = True) -> None:
        self.runner, self.limit, self.need_passing = Runner(cfg), limit, need_passing
        self.wall_s = cfg.wall_s  # a baseline's first wall clock (walls.py: doubled once after a timeout)
        self.envs = self.runner.envs  # where the attempts' environments are built: their notes
        # Candidates considered: one that fails to build costs seconds and no baseline, so more
        # are tried than baselines run (jsonschema 3.2.0 of 2019-11: its own build fails on the
        # 3.7 and 3.6 of its date, with every requirement set, before 3.10's date builds it).
        self.candidates = 2 * limit
        self.derivations: list[Derivation] = []

    def derive(self, instance: Instance, snapshot: Path, tests: Sequence[str] = ()) -> Derivation:
        """Try the candidates of the instance's snapshot (module docstring). `tests`: the test
        files to run (a repository's suite), narrowed to its own selection; () runs the
        instance's own tests (its test patch's files)."""
        command = own_command(snapshot)
        chosen_tests = select_tests(tests, command.paths, command.args)
        candidates = derive_candidates(snapshot, instance.created_at, instance.repo, self.candidates)
        attempts: list[Attempt] = []
        found: tuple[str, EnvSpec] | None = None
        pending = list(candidates)
        for k in range(len(candidates)):
            if sum(a.stage in ("baseline", "ok") for a in attempts) >= self.limit:
                break
            name, spec = pending.pop(0)
            attempt = self._attempt(instance, spec, name, chosen_tests, k)
            attempt = replace(attempt, notes=self._notes(spec, snapshot))
            attempts.append(attempt)
            log.info(
                "[env] %s: python %s, %s: %s %s", instance.repo, spec.python, name, attempt.stage, _first(attempt.error)
            )
            if attempt.stage == "ok":
                found = (name, spec)
                break
            if attempt.stage == "snapshot" or attempt.error.startswith(("timeout", "no_tests")):
                # The commit cannot be checked out, the suite ran out of its wall clock (it would
                # again on every other candidate, each costing that much), or there is no test
                # to run (no test patch, no test module: no candidate changes that): no more tries.
                break
            pending = reordered(pending, attempt)
        if found is None:
            best = max(range(len(attempts)), key=lambda i: (attempts[i].counts.get("passed", 0), -i))
            tried = [(a.requirements, a.python) for a in attempts]
            found = next(c for c in candidates if (c[0], c[1].python) == tried[best])
        derivation = Derivation(
            instance.repo,
            instance.base_commit or "",
            found[1],
            found[0],
            any(a.stage == "ok" for a in attempts),
            tuple(attempts),
            command,
            len(chosen_tests),
        )
        self.derivations.append(derivation)
        print(derivation.summary(), flush=True)
        return derivation

    def _notes(self, spec: EnvSpec, snapshot: Path) -> tuple[str, ...]:
        """What the environment's build read otherwise in the snapshot's metadata (lenient.py)."""
        path = self.envs.root / self.envs.key(spec, snapshot) / environments.REPAIRED
        return tuple(str(n) for n in json.loads(path.read_text())) if path.is_file() else ()

    def _attempt(self, instance: Instance, spec: EnvSpec, name: str, tests: tuple[str, ...], k: int) -> Attempt:
        clock = time.monotonic()
        job = TestJob(replace(instance, environment=spec.to_json()), "", job_id=f"derive/{k}", tests=tests)
        run = self.runner.run(job)
        if run.status == "timeout":  # once more with a doubled wall: the machine's load is not the suite's
            run = self.runner.run(replace(job, wall_s=walls.retry_wall(run.wall_s or self.wall_s)))
        unloaded = set(run.outcomes) == {LOAD_FAILURE} or set(run.outcomes.values()) == {"error"}
        if run.status == "ok" and unloaded and instance.patch and spec.node is not None:
            # A JavaScript runner stopped before its first test, or every test file failed to
            # load, the tests importing what only the fix adds (mocha stops at the first file
            # that cannot load; vitest and jest report the file): whether this environment runs
            # them is asked with the fix.
            run = self.runner.run(replace(job, patch=instance.patch, job_id=f"derive/{k}/fixed"))
        seconds, build_s = round(time.monotonic() - clock, 1), round(run.env_build_s, 1)
        stage = STAGES.get(run.status, "baseline")
        if run.status != "ok":
            error = _lines(f"{run.status}: {run.reason}")
            return Attempt(spec.python, name, stage, error, seconds, build_s, run_s=run.seconds, wall_s=run.wall_s)
        counts = dict(Counter(run.outcomes.values()))
        why = unusable(counts, self.need_passing)
        if why:  # the first failure's first line says what is missing (No module named 'attr')
            first = next((f"{t}: {line}" for t, line in sorted(run.failures.items()) if line), "")
            why = _lines(f"{why}\n{first}" if first else why)
        stage = "baseline" if why else "ok"
        return Attempt(spec.python, name, stage, why or "", seconds, build_s, counts, run.seconds, run.wall_s)


def write_records(out: Path, derivations: Sequence[Derivation]) -> None:
    """`_environments.json` in `out`: every derivation's record, in order."""
    write_text(out / RECORDS, json.dumps([d.record() for d in derivations], indent=1) + "\n")


def _lines(text: str) -> str:
    """An error for the record: its first line (what failed) and its last ones, where a
    traceback's exception and a resolver's cause are, within _ERROR_LINES and _ERROR_CHARS."""
    lines = text.strip().splitlines()
    if len(lines) > _ERROR_LINES:
        lines = [lines[0], "...", *lines[-(_ERROR_LINES - 2) :]]
    return "\n".join(line[: _ERROR_CHARS // len(lines)] for line in lines)


def _first(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""
