"""One test run: an instance's snapshot, a candidate patch and its test patch, its tests, their outcomes.

    TestJob(instance, patch)  ->  Runner.run  ->  TestRun(status, outcomes, resolved, ...)

The candidate patch (a unified diff; "" for none) and then the instance's test patch (or the
job's own, e.g. a model-written reproduction test in the Agentless evaluation) are
applied to the snapshot's files with the project's diff library (data/patching.py: exact
context, as `git apply` without fuzz); a patch that does not apply ends the run as
"patch_failed", counted, with no test run. The tests run are the test files the test patch
touches (SWE-bench's "test directives"), by pytest in the sandbox (sandbox.py), which writes a
JUnit XML report; outcomes are read from it (junit.py), never from the log.

Resolved, SWE-bench's rule: every FAIL_TO_PASS test and every PASS_TO_PASS test passed (a test
missing from the report did not pass). None when the instance carries no FAIL_TO_PASS (v2 data).

Test ids are made machine-independent: a test parametrized by a path inside the environment
(requests' `test_unzipped_paths_unchanged[<site-packages>/pytest/__init__.py]`, pydicom's data
files) has the environment's directory in its id, which depends on `cache_dir` and the node;
that prefix reads `{env}`, the interpreter's `{python}` (stable_ids), so labels made by
data.validate on one machine match runs on any other.

Statuses, each a counted reason for the callers: "ok" (the report was read), "patch_failed",
"env_failed" (the environment could not be built), "no_interpreter", "no_snapshot",
"timeout" (the wall-clock limit), "killed" (output or memory limit), "no_report" (pytest ended
without writing one, e.g. the patch broke collection of the whole session).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from conf.config import ExecutionConfig
from data.patching import PatchError, apply_patch, parse_patch
from data.schema import Instance
from reward.execution import junit, sandbox
from reward.execution.environments import EnvironmentFailed, Environments, EnvSpec, InterpreterUnavailable
from reward.execution.snapshots import Snapshots, SnapshotUnavailable

HOST_DEMO_SPEC = EnvSpec()  # the demo set's: its own files, the project's interpreter


@dataclass(frozen=True)
class TestJob:
    __test__ = False  # not a pytest test class
    instance: Instance
    patch: str  # the candidate patch ("" = none: the base commit's code with the test patch)
    job_id: str = ""
    # Replaces the instance's test patch when set (a model-written reproduction test, issue 14):
    # its files are the tests run, and `resolved` is None (the instance's labels do not apply).
    test_patch: str | None = None
    # Test files already in the snapshot to run instead of a test patch's (the Agentless
    # regression fallback: the repository's own tests that import the edited modules); the test
    # patch then applies only when `test_patch` is set, and `resolved` is None.
    tests: tuple[str, ...] = ()


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


def test_files(test_patch: str | None) -> list[str]:
    """The Python files the test patch creates or changes: the tests to run."""
    if not test_patch:
        return []
    return sorted({fp.new_path for fp in parse_patch(test_patch) if fp.new_path and fp.new_path.endswith(".py")})


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
    """Runs jobs on this node; a plain class, made a Ray actor by the test pool (actors/test_pool.py)."""

    def __init__(self, cfg: ExecutionConfig) -> None:
        self.cfg, self.limits = cfg, limits(cfg)
        cache = Path(cfg.cache_dir).expanduser().resolve()
        self.envs = Environments(cache / "envs", cfg.build_timeout_s)
        self.snapshots = Snapshots(cache / "snapshots", cfg.repos)

    def ready(self) -> int:
        """The runner's process id (a readiness probe)."""
        return os.getpid()

    def run(self, job: TestJob) -> TestRun:
        inst = job.instance
        fail = lambda status, reason, **kw: TestRun(job.job_id, inst.instance_id, status, reason=reason, **kw)  # noqa: E731
        try:
            spec = EnvSpec.from_json(inst.environment) or HOST_DEMO_SPEC
            snapshot = self.snapshots.path(inst, spec)
            env = self.envs.ensure(spec, snapshot)
        except SnapshotUnavailable as exc:
            return fail("no_snapshot", str(exc))
        except InterpreterUnavailable as exc:
            return fail("no_interpreter", str(exc))
        except (EnvironmentFailed, ValueError) as exc:
            return fail("env_failed", str(exc))
        own_tests = job.test_patch is None and not job.tests
        test_patch = inst.test_patch if own_tests else job.test_patch
        try:
            changes = patched_files(snapshot, job.patch, test_patch or "")
        except PatchError as exc:
            return fail("patch_failed", str(exc), env_build_s=env.built_s)
        tests = list(job.tests) or test_files(test_patch)
        if not tests:
            return fail("no_tests", "the instance has no test patch", env_build_s=env.built_s)
        argv = [env.python, "-m", "pytest", *junit.PYTEST_ARGS, "--junitxml=/results/junit.xml", *tests]
        start = time.monotonic()
        result = sandbox.run(
            argv,
            snapshot=snapshot,
            changes=changes,
            ro_paths=env.ro_paths,
            env=env.variables,
            limits=self.limits,
            loopback=spec.network == "loopback",
        )
        seconds, log = round(time.monotonic() - start, 3), (result.stdout + result.stderr)[-4000:]
        if result.killed:
            status = "timeout" if result.killed == "timeout" else "killed"
            return fail(
                status, f"the test run was stopped: {result.killed}", seconds=seconds, log=log, env_build_s=env.built_s
            )
        if "junit.xml" not in result.files:
            return fail(
                "no_report",
                f"pytest exited {result.returncode} without a report: {_last_line(log)}",
                seconds=seconds,
                log=log,
                env_build_s=env.built_s,
            )
        outcomes = stable_ids(junit.outcomes(result.files["junit.xml"]), env.ro_paths)
        why = stable_ids(junit.failures(result.files["junit.xml"]), env.ro_paths)
        verdict = resolved(inst, outcomes) if own_tests else None
        return TestRun(job.job_id, inst.instance_id, "ok", outcomes, verdict, None, seconds, env.built_s, log, why)


def patched_files(snapshot: Path, *patches: str) -> dict[str, str | None]:
    """New content of every file the patches touch, applied in order (None = deleted)."""
    files: dict[str, str] = {}
    changes: dict[str, str | None] = {}
    for patch in patches:
        if not patch.strip():
            continue
        for fp in parse_patch(patch):
            for rel in (fp.old_path, fp.new_path):
                if rel and rel not in files and rel not in changes and (snapshot / rel).is_file():
                    files[rel] = (snapshot / rel).read_text(encoding="utf-8", errors="surrogateescape")
        new = apply_patch({**files, **{k: v for k, v in changes.items() if v is not None}}, patch)
        for rel, content in new.items():
            deleted = content == "" and not any(fp.new_path == rel for fp in parse_patch(patch))
            changes[rel] = None if deleted else content
    return changes


def _last_line(log: str) -> str:
    """The last non-blank line of the output: the error of a run that never reached its tests
    (an ImportError in a conftest or a plugin, a usage error), named in the reason."""
    return next((line.strip()[:300] for line in reversed(log.splitlines()) if line.strip()), "no output")
