"""One test run: an instance's snapshot, a candidate patch and its test patch, its tests, their outcomes.

    TestJob(instance, patch)  ->  Runner.run  ->  TestRun(status, outcomes, resolved, ...)

The candidate patch (a unified diff; "" for none) and then the instance's test patch (or the
job's own, e.g. a model-written reproduction test in the Agentless evaluation) are
applied to the snapshot's files with the project's diff library (data/patching.py: exact
context, as `git apply` without fuzz); a patch that does not apply, or that names a path
outside the repository ("unsafe path"), ends the run as "patch_failed", counted, with no test
run. The tests run are the test files the test patch touches (SWE-bench's "test directives"),
by the environment's test runner (runners.py: pytest, or django's runtests.py) in the sandbox
(sandbox.py); outcomes are read from the harness's report stream
(bootstrap.py, report.py), never from the log.

Nothing the candidate writes decides its verdict (the threat model: docs/security.md):

    guarded files   the candidate's changes to files pytest or Python honours (conftest.py,
                    ini files, test files, compiled files, stdlib shadows, ...: guard.py) are
                    not applied: the run sees the base commit's, `TestRun.guarded` names them
    the test patch  the files it touches are restored from the snapshot before it is applied
                    (as SWE-bench does), so a candidate's edits elsewhere in them do not survive
    the runner      started by the harness's bootstrap (`python -s -B`, the repository after
                    the standard library and the environment on sys.path); pytest reads only
                    the configuration the base commit and the test patch give
    the report      streamed to the sandbox's PID 1 as each test ends, never a file; a stream
                    that is not the recorder's is "bad_report"; the session's own end is part
                    of it (no end: "no_report")
    canaries        a test file of the harness's, random names, added after every patch, with
                    tests that must pass and tests that must fail (plain and unittest style,
                    report.py); a report in which they do not show exactly that, or in which
                    the recorder saw pytest's machinery replaced, is "tampered": unresolved,
                    counted, and logged with the patch by the pool
    the probe       the instance's FAIL_TO_PASS ids, the candidate's applied Python files with
                    their changed lines and the test files go to the recorder through a
                    descriptor only it reads (sandbox.run's `secret`: no path inside names the
                    labels); a FAIL_TO_PASS test that passed while comparing a value that
                    equals fresh sentinels (an always-equal object), or without its probe
                    line, is "tampered" (bootstrap.EqualityProbe, report.probed)
    the policy      a capability no fix needs (frames, tracing, ctypes, gc, code objects, the
                    test files' text) used by the candidate's changed code is "tampered"
                    (bootstrap.Policy: an audit hook, Python 3.8 on)
    the screen      a candidate whose added code reaches for what no fix needs (frames,
                    tracing, ctypes, mock.ANY, the runner's internals: reward/screen.py) is
                    "tampered" before anything runs, the rule named in the reason
    the JS guard    a JavaScript run's guard (js/swe_rl_guard.cjs) says its findings and its
                    end on a socket PID 1 holds, with a secret drawn here (sandbox.run's
                    `guard`); a finding, or a session that ended without the guard's end, is
                    "tampered". SWE_RL_CANDIDATE names the candidate's own files for it

Resolved, SWE-bench's rule: every FAIL_TO_PASS test and every PASS_TO_PASS test passed (a test
missing from the report did not pass). None when the instance carries no FAIL_TO_PASS (v2 data).

Test ids are made machine-independent: a test parametrized by a path inside the environment
(requests' `test_unzipped_paths_unchanged[<site-packages>/pytest/__init__.py]`, pydicom's data
files) has the environment's directory in its id, which depends on `cache_dir` and the node;
that prefix reads `{env}`, the interpreter's `{python}` (stable_ids), so labels made by
data.validate on one machine match runs on any other.

Statuses, each a counted reason for the callers: "ok" (the report was read), "patch_failed",
"env_failed" (the environment or a service of it failed), "no_interpreter", "no_snapshot",
"timeout" (the wall-clock limit), "killed" (output or memory limit), "no_report" (the session
did not end by itself: pytest could not start, or a process exited in the middle),
"bad_report" (a stream the recorder does not write, or over the size limit), "tampered" (the
canaries were wrong, or the probe found an always-equal value), "error" (the runner itself
failed on the job; the reason says how).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from conf.config import ExecutionConfig
from data.patching import PatchError, apply_patch, parse_patch
from data.paths import UnsafePath, read_beneath
from data.schema import Instance
from reward.execution import cgroups, check, coverage, sandbox, services, walls
from reward.execution.coverage import Tools
from reward.execution.environments import (
    Environment,
    EnvironmentFailed,
    Environments,
    EnvSpec,
    InterpreterUnavailable,
)
from reward.execution.guard import is_guarded
from reward.execution.report import BadReport, Canaries, Tampered, parse, probed
from reward.execution.runners import harness_files, runner_for, selected
from reward.execution.snapshots import Snapshots, SnapshotUnavailable
from reward.execution.workspace import Session, SessionFailed, SessionLimits
from reward.screen import describe, screen_patch

logger = logging.getLogger(__name__)

HOST_DEMO_SPEC = EnvSpec()  # the demo set's: its own files, the project's interpreter


@dataclass(frozen=True)
class TestJob:
    __test__ = False  # not a pytest test class
    instance: Instance
    patch: str  # the candidate patch ("" = none: the base commit's code with the test patch)
    job_id: str = ""
    # Replaces the instance's test patch when set (a model-written reproduction test, Agentless):
    # its files are the tests run, and `resolved` is None (the instance's labels do not apply).
    test_patch: str | None = None
    # Test files already in the snapshot to run instead of a test patch's (the Agentless
    # regression fallback: the repository's own tests that import the edited modules); the test
    # patch then applies only when `test_patch` is set, and `resolved` is None.
    tests: tuple[str, ...] = ()
    # Measure the lines the tests execute (coverage.py, reward/execution/coverage.py): the
    # injector's baseline asks, to draw bugs where the tests look; pytest runs only.
    coverage: bool = False
    # What the same tests took on the working code (seconds; None: not measured): the run's wall
    # clock follows it (walls.wall_for, never under the configured wall_s).
    baseline_s: float | None = None
    wall_s: float | None = None  # an explicit wall clock (a retry's, walls.retry_wall); None: from the above

    def wall(self, floor_s: float) -> float:
        """The wall clock this job runs under, with `floor_s` the configured one."""
        return self.wall_s if self.wall_s is not None else walls.wall_for(self.baseline_s, floor_s)


@dataclass(frozen=True)
class TestRun:
    __test__ = False
    job_id: str
    instance_id: str
    status: str
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed/failed/error/skipped
    resolved: bool | None = None
    reason: str | None = None  # why, when status is not "ok"
    seconds: float = 0.0  # in the sandbox
    env_build_s: float = 0.0  # building the environment (0 when it was cached)
    log: str = ""  # the end of pytest's output
    failures: dict[str, str] = field(default_factory=dict)  # node id -> first line of its failure (some)
    guarded: tuple[str, ...] = ()  # the candidate's files that were not applied (guard.py)
    uncapped: bool = False  # ran without its memory and pids caps (SWE_RL_LIMITS=best_effort)
    # snapshot path -> lines the tests executed, when the job asked (empty: not measured)
    covered: dict[str, frozenset[int]] = field(default_factory=dict)
    wall_s: float = 0.0  # the wall clock it ran under (0: not run by a Runner)


def run_retried(run: Callable[[list[TestJob]], list[TestRun]], jobs: Sequence[TestJob]) -> list[TestRun]:
    """`run(jobs)` (a pool's run, results in order), and each job that ran out of its wall clock
    once more with that wall doubled (walls.retry_wall): a timeout on a loaded machine is not a
    verdict on the code. The retry's run replaces the first one."""
    runs = list(run(list(jobs))) if jobs else []
    again = [i for i, r in enumerate(runs) if r.status == "timeout"]
    if again:
        logger.info("[runner] %d of %d runs timed out: each once more with its wall doubled", len(again), len(runs))
        redo = [
            replace(jobs[i], wall_s=walls.retry_wall(runs[i].wall_s) if runs[i].wall_s else jobs[i].wall_s)
            for i in again
        ]
        for i, rerun in zip(again, run(redo), strict=True):
            runs[i] = rerun
    return runs


def test_files(test_patch: str | None, suffixes: tuple[str, ...] = (".py",)) -> list[str]:
    """The files of the runner's language (`suffixes`: runners.TestRunner.suffixes) that the test
    patch creates or changes: the tests to run."""
    if not test_patch:
        return []
    return sorted({fp.new_path for fp in parse_patch(test_patch) if fp.new_path and fp.new_path.endswith(suffixes)})


def labelled_files(instance: Instance, suffixes: tuple[str, ...] = (".py",)) -> list[str]:
    """The test files that the instance's labels (FAIL_TO_PASS, PASS_TO_PASS: `file::name`, the
    JavaScript runners' ids too) name: the tests of an instance with no test patch, whose tests
    are all in its snapshot (made instances: data/bugs/repository.py)."""
    ids = [*(instance.fail_to_pass or ()), *(instance.pass_to_pass or ())]
    return sorted({t.split("::", 1)[0] for t in ids if "::" in t and t.split("::", 1)[0].endswith(suffixes)})


def rooted(snapshot: Path, files: list[str]) -> list[str]:
    """The labelled test files as paths in the snapshot: a pytest id is relative to pytest's
    rootdir, the repository's root or a folder with its own pytest.ini (rich's tests/: its ids
    read `test_align.py::...`), so a file not at the root is looked for under such a folder."""
    inis = sorted(f"{ini.parent.name}/" for ini in snapshot.glob("*/pytest.ini") if _regular(ini))
    roots = ["", *inis]
    out = []
    for name in files:
        found = next((r + name for r in roots if _regular(snapshot / (r + name))), name)
        out.append(found)
    return out


def _regular(path: Path) -> bool:
    try:
        return path.is_file() and not path.is_symlink()
    except OSError:
        return False


# The record a JavaScript run's guard writes for a runner that exited before its first test
# (js/swe_rl_guard.cjs: mocha, when a test file fails to load).
LOAD_FAILURE = "(load)"
ENV_MARKS = ("{env}", "{python}")  # what the environment's and the interpreter's prefixes read as in test ids


def stable_ids(by_id: dict[str, str], prefixes: tuple[str, ...]) -> dict[str, str]:
    """Test ids with the environment's prefixes (Environment.ro_paths: its own directory, then
    the interpreter's) replaced by ENV_MARKS: the same test has the same id on every node."""
    marks = sorted(zip(prefixes, ENV_MARKS, strict=False), key=lambda pm: -len(pm[0]))
    out = {}
    for test_id, value in by_id.items():
        for prefix, mark in marks:
            test_id = test_id.replace(prefix.rstrip("/"), mark)
        out[test_id] = value
    return out


def unstable_ids(ids: tuple[str, ...], prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """stable_ids undone: labels with ENV_MARKS as the recorder in this environment writes them."""
    marks = list(zip(prefixes, ENV_MARKS, strict=False))
    out = []
    for test_id in ids:
        for prefix, mark in marks:
            test_id = test_id.replace(mark, prefix.rstrip("/"))
        out.append(test_id)
    return tuple(out)


def probe_spec(
    watched: tuple[str, ...],
    candidate: str,
    test_patch: str,
    changes: dict[str, str | None],
    tests: list[str],
    snapshot: Path,
) -> str:
    """bootstrap.py's secret (sandbox.run's `secret`, never a file the tested code can read):
    the tests to watch, the candidate's Python files as applied (not its guarded files, nor
    those the test patch replaced: those are the base commit's and the dataset's) with the
    lines it added or changed in each (bootstrap.Policy scopes its findings to the code
    holding them), and the test files run (which the candidate may not read). "" when there
    are no watched tests or no such files: nothing to probe."""
    theirs = {fp.new_path for fp in parse_patch(candidate) if fp.new_path and fp.new_path.endswith(".py")}
    replaced = {fp.new_path for fp in parse_patch(test_patch)} if test_patch.strip() else set()
    files = sorted((theirs & {f for f, text in changes.items() if text is not None}) - replaced)
    if not watched or not files:
        return ""
    lines = {f: changed_lines(_old_text(snapshot, f), changes[f] or "") for f in files}
    return json.dumps({"tests": list(watched), "files": files, "lines": lines, "test_files": sorted(tests)})


def _old_text(snapshot: Path, rel: str) -> str:
    try:
        data = read_beneath(snapshot, rel)
    except UnsafePath:
        return ""
    return "" if data is None else data.decode("utf-8", "surrogateescape")


def changed_lines(old: str, new: str) -> list[int]:
    """The lines of `new` (1-based) that are not lines of `old` kept in place: added or
    replaced, and for a deletion the line that now stands where the removed ones were."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    out: set[int] = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            out.add(j1 + 1)
    return sorted(out)


def resolved(instance: Instance, outcomes: dict[str, str]) -> bool | None:
    if instance.fail_to_pass is None:
        return None
    wanted = [*instance.fail_to_pass, *(instance.pass_to_pass or ())]
    return bool(instance.fail_to_pass) and all(outcomes.get(t) == "passed" for t in wanted)


def limits(cfg: ExecutionConfig) -> sandbox.Limits:
    return sandbox.Limits(
        wall_s=cfg.wall_s,
        cpu_s=cfg.cpu_s,
        memory_mb=cfg.memory_mb,
        pids=cfg.pids,
        output_bytes=cfg.output_kb << 10,
        file_mb=cfg.file_mb,
    )


class Runner:
    """Runs jobs on this node; a plain class, made a Ray actor by the test pool (reward/execution/pool.py)."""

    def __init__(self, cfg: ExecutionConfig) -> None:
        self.cfg, self.limits = cfg, limits(cfg)
        # The sandbox reads its cap policy from the process environment (cgroups.py), as the
        # commands that take no config do: a runner's process takes its config's settings.
        for variable, value in ((cgroups.LIMITS_ENV, cfg.limits), (cgroups.ROOT_ENV, cfg.cgroup_root)):
            if value:
                os.environ[variable] = value
        cache = Path(cfg.cache_dir).expanduser().resolve()
        self.envs = Environments(cache / "envs", cfg.build_timeout_s)
        self.snapshots = Snapshots(cache / "snapshots", cfg.repos)
        self.tools = Tools(cache / "tools", cfg.build_timeout_s)

    def ready(self) -> int:
        """The runner's process id, once its node passed the node check (check.py): on a node
        that cannot run the sandbox the job stops here, NodeNotReady naming the node and why."""
        check.require(self.cfg.cache_dir)
        return os.getpid()

    def session(self, instance: Instance) -> Session:
        """A live sandbox session over the instance's snapshot in its environment, as its test
        runs see them (the build's products and version modules, its stand-in services, its
        network), with this runner's limits per command: an agent's episode (workspace.py).
        Raises SessionFailed naming why it could not start (no snapshot, no interpreter, the
        environment failed): an infrastructure failure, never the policy's."""
        try:
            spec, snapshot, env, servers = self._prepare(instance)
        except (SnapshotUnavailable, InterpreterUnavailable, EnvironmentFailed, ValueError) as exc:
            raise SessionFailed(f"{instance.instance_id}: {type(exc).__name__}: {exc}") from None
        return Session(
            snapshot,
            env,
            limits=SessionLimits(self.limits),
            loopback=spec.network == "loopback",
            servers=servers,
        )

    def _prepare(self, instance: Instance) -> tuple[EnvSpec, Path, Environment, tuple[sandbox.Server, ...]]:
        """What a test run and a session of the instance both stand on: its spec, its snapshot,
        its environment (built on first use) and its stand-in services. Raises
        SnapshotUnavailable, InterpreterUnavailable, EnvironmentFailed or ValueError."""
        spec = EnvSpec.from_json(instance.environment) or HOST_DEMO_SPEC
        snapshot = self.snapshots.path(instance, spec)
        env = self.envs.ensure(spec, snapshot)
        return spec, snapshot, env, services.servers(spec.services, self.envs)

    def run(self, job: TestJob) -> TestRun:
        try:
            return self._run(job)
        except Exception as exc:  # a status, never a lost job or a dead runner (test_pool.py)
            return TestRun(job.job_id, job.instance.instance_id, "error", reason=f"{type(exc).__name__}: {exc}"[:500])

    def _run(self, job: TestJob) -> TestRun:
        inst = job.instance
        fail = lambda status, reason, **kw: TestRun(job.job_id, inst.instance_id, status, reason=reason, **kw)  # noqa: E731
        if findings := screen_patch(job.patch):  # before anything runs: reward/screen.py
            return fail("tampered", describe(findings), resolved=False)
        try:
            spec, snapshot, env, servers = self._prepare(inst)
        except SnapshotUnavailable as exc:
            return fail("no_snapshot", str(exc))
        except InterpreterUnavailable as exc:
            return fail("no_interpreter", str(exc))
        except (EnvironmentFailed, ValueError) as exc:
            return fail("env_failed", str(exc))
        own_tests = job.test_patch is None and not job.tests
        test_patch = inst.test_patch if own_tests else job.test_patch
        test_runner = runner_for(spec.runner)
        owned = test_runner.guarded_dirs
        try:
            tests = list(job.tests) or test_files(test_patch, test_runner.suffixes)
            if not tests and own_tests and not test_patch:
                # Its labels name the tests, all in the snapshot: their folders are the runner's
                # whole (a candidate's change to a helper beside them, tests/utils.py, is not applied).
                tests = rooted(snapshot, labelled_files(inst, test_runner.suffixes))
                owned = (*owned, *sorted({str(PurePosixPath(t).parent) for t in tests} - {"."}))
            roots = (*spec.pythonpath, *{str(PurePosixPath(t).parent) for t in tests})  # the tests' import path
            changes, guarded = patched_files(snapshot, job.patch, test_patch or "", roots, owned)
            written = parse_patch(job.patch) if job.patch.strip() else []
            authored = sorted({fp.new_path for fp in written if fp.new_path})
        except PatchError as exc:
            return fail("patch_failed", str(exc), env_build_s=env.built_s)
        if not tests:
            return fail("no_tests", "the instance has no test patch", env_build_s=env.built_s, guarded=guarded)
        if spec.test_paths:  # the runner's own selection (a JavaScript command's globs)
            outside, tests = tests, [t for t in tests if selected(t, spec.test_paths)]
            if not tests:
                why = f"none of {outside[:3]} is in the runner's selection {list(spec.test_paths)}"
                return fail("no_tests", why, env_build_s=env.built_s, guarded=guarded)
        changes = {**env.generated, **changes}  # the build's version modules (environments.py), then the patches
        argv, canaries = command(env.python, spec, tests)
        if not argv:
            return fail(
                "no_tests", f"no test module of the {spec.runner} runner in {tests[:3]}", env_build_s=env.built_s
            )
        changes.update(canaries.files())  # after every patch: nothing of theirs replaces them
        variables = {k: v for k, v in env.variables.items() if k != "PYTHONPATH"}
        variables["SWE_RL_PATH"] = env.variables.get("PYTHONPATH", "")  # bootstrap.py appends it to sys.path
        token = secrets.token_hex(12)  # the guard's, for a finding in a process without the pipe
        variables.update(test_runner.variables(token))
        guard_secret = None  # the guard's socket's (sandbox.run's `guard`): JavaScript's guard says its end there
        if test_runner.language == "javascript":
            guard_secret = secrets.token_hex(16)
            # The candidate's own files: a test hook or a watched global set from one of them is a finding.
            variables["SWE_RL_CANDIDATE"] = json.dumps([p for p in authored if p not in tests])
        watched = unstable_ids(inst.fail_to_pass or (), env.ro_paths) if own_tests else ()
        probe = probe_spec(watched, job.patch, test_patch or "", changes, tests, snapshot)
        ro_paths = env.ro_paths
        if job.coverage and spec.runner == "pytest":
            try:
                tool = str(self.tools.coverage(env.python, spec.python))
                variables[coverage.ENV_VAR], ro_paths = tool, (*ro_paths, tool)
            except RuntimeError as exc:  # the run goes on, unmeasured: the injector draws from every line
                logger.warning("[runner] %s: %s", inst.instance_id, exc)
        limits = replace(self.limits, wall_s=job.wall(self.limits.wall_s))
        start = time.monotonic()
        result = sandbox.run(
            argv,
            snapshot=snapshot,
            changes=changes,
            ro_paths=ro_paths,
            harness_files=harness_files(),
            secret=probe,  # the labels: in a descriptor, never a readable file
            env=variables,
            limits=limits,
            loopback=spec.network == "loopback",
            servers=servers,
            layers=env.layers,
            guard=guard_secret,
        )
        seconds, log = round(time.monotonic() - start, 3), (result.stdout + result.stderr)[-4000:]
        done: dict[str, Any] = {"seconds": seconds, "log": log, "env_build_s": env.built_s, "guarded": guarded}
        done["wall_s"] = limits.wall_s
        done["uncapped"] = result.uncapped
        said = f"{token} tampered: "  # the guard in a process without the pipe (vitest's forks)
        for stream in (result.stderr, result.stdout):
            if said in stream:
                why = stream.split(said, 1)[1].splitlines()[0][:300]
                kept = {k: v for k, v in done.items() if k != "covered"}
                return fail(
                    "tampered", f"the harness's guard found the test machinery changed: {why}", resolved=False, **kept
                )
        return self._verdict(job, result, canaries, env.ro_paths, watched, done)

    @staticmethod
    def _verdict(
        job: TestJob,
        result: sandbox.SandboxResult,
        canaries: Canaries,
        prefixes: tuple[str, ...],
        watched: tuple[str, ...],
        done: dict[str, Any],
    ) -> TestRun:
        """The run's status and outcomes from what the sandbox returned (the report stream,
        checked: report.py), never from its log. `watched`: the probed tests' ids as the
        recorder writes them (the instance's FAIL_TO_PASS; none when its labels do not apply)."""
        inst = job.instance
        own_tests = job.test_patch is None and not job.tests
        fail = lambda status, reason, **kw: TestRun(job.job_id, inst.instance_id, status, reason=reason, **kw)  # noqa: E731
        if result.failed_server:  # a stand-in of the environment (services.py): the tests never ran
            return fail("env_failed", result.failed_server, **done)
        if result.killed:
            status = "timeout" if result.killed == "timeout" else "killed"
            return fail(status, f"the test run was stopped: {result.killed}", **done)
        if result.guard and result.guard.startswith("tampered: "):  # the guard's own word, on its socket
            found = f"the harness's guard found the test machinery changed: {result.guard.removeprefix('tampered: ')}"
            return fail("tampered", found, resolved=False, **done)
        if result.report is None:
            return fail("bad_report", "the report passed its size limit (sandbox.Limits.report_bytes)", **done)
        try:
            report = parse(result.report)
        except BadReport as exc:
            return fail("bad_report", f"the report is not the recorder's: {exc}", **done)
        if report.exit_code is None:
            cut = f"the test runner exited {result.returncode} before its session ended: {_last_line(done['log'])}"
            return fail("no_report", cut, **done)
        if result.guard == "silent":  # a session that ended without the guard's end: it was switched off
            silent = "the harness's guard did not say the run's end (its descriptor closed, its exit listener gone)"
            return fail("tampered", silent, resolved=False, **done)
        try:
            checked = canaries.check(report)
            probed(report, watched)
        except Tampered as exc:
            return fail("tampered", str(exc), resolved=False, **done)
        outcomes = stable_ids(checked, prefixes)
        why = stable_ids({k: v for k, v in report.failures.items() if k in checked}, prefixes)
        if LOAD_FAILURE in why:  # a JavaScript runner that stopped before its first test: its own words
            why[LOAD_FAILURE] = _error_line(done["log"])
        verdict = resolved(inst, outcomes) if own_tests else None
        done["covered"] = report.covered or {}
        return TestRun(job.job_id, inst.instance_id, "ok", outcomes, verdict, None, **done, failures=why)


def command(python: str, spec: EnvSpec, tests: list[str]) -> tuple[list[str], Canaries]:
    """The test process's argv for the environment's runner (runners.py), and the canaries it
    runs with (an empty argv: none of `tests` is a test module that runner takes)."""
    root = spec.pythonpath[0] if spec.pythonpath else "."
    return runner_for(spec.runner).command(python, spec.runner_args, root, tests)


def patched_files(
    snapshot: Path,
    candidate: str,
    test_patch: str = "",
    roots: tuple[str, ...] = (".",),
    guarded_dirs: tuple[str, ...] = (),
) -> tuple[dict[str, str | None], tuple[str, ...]]:
    """New content of every file the patches touch (None = deleted), and the candidate's
    guarded paths that were left out (guard.py; `roots`: the folders the tests import from;
    `guarded_dirs`: folders the runner owns whole, runners.TestRunner.guarded_dirs).
    The candidate is applied to the snapshot; the test patch to the snapshot's version of
    every file it touches and the candidate's of the rest."""
    changes = _applied(snapshot, candidate, {})
    guarded = tuple(
        sorted(rel for rel in changes if is_guarded(rel, read_beneath(snapshot, rel) is None, roots, guarded_dirs))
    )
    for rel in guarded:
        del changes[rel]
    if test_patch.strip():
        touched = {p for fp in parse_patch(test_patch) for p in (fp.old_path, fp.new_path) if p}
        kept = {rel: content for rel, content in changes.items() if rel not in touched}
        changes = {**kept, **_applied(snapshot, test_patch, kept)}
    return changes, guarded


def _applied(snapshot: Path, patch: str, changes: dict[str, str | None]) -> dict[str, str | None]:
    """`changes` with `patch` applied on top of them and of the snapshot (read without
    following a link: data/paths.py)."""
    if not patch.strip():
        return dict(changes)
    file_patches = parse_patch(patch)
    files = {rel: content for rel, content in changes.items() if content is not None}
    for fp in file_patches:
        for rel in (fp.old_path, fp.new_path):
            if rel and rel not in files and rel not in changes:
                try:
                    data = read_beneath(snapshot, rel)
                except UnsafePath as exc:
                    raise PatchError(str(exc)) from None
                if data is not None:
                    files[rel] = data.decode("utf-8", "surrogateescape")
    result = dict(changes)
    for rel, content in apply_patch(files, patch).items():
        deleted = content == "" and not any(fp.new_path == rel for fp in file_patches)
        result[rel] = None if deleted else content
    return result


def _error_line(log: str) -> str:
    """The first line of the output naming an error (`Error: Cannot find module ...`, node's
    `SyntaxError: ...`), else the last line: what stopped a runner before its first test."""
    found = re.search(r"^.*\b[A-Za-z]*Error\b:? .*$", log, re.MULTILINE)
    return found.group(0).strip()[:300] if found else _last_line(log)


def _last_line(log: str) -> str:
    """The last non-blank line of the output: the error of a run that never reached its tests
    (an ImportError in a conftest or a plugin, a usage error), named in the reason."""
    return next((line.strip()[:300] for line in reversed(log.splitlines()) if line.strip()), "no output")
