"""`python -m data.inject`: validated instances made by injecting bugs into working code.

    python -m data.inject --git OWNER/NAME=CLONE [--commit REF] [--paths src/pkg] --out DIR
        [--per-repo 4] [--environment derive|JSON] [--relevant-files 3] ...
    python -m data.inject --data demo --out DIR [--per-instance 4] [--limit N] ...
        ... [--combine 1] [--seed 0] [--operators binop,compare,...] [--near-dup-threshold 0.8]
        [--workers 2 | --ray-address ADDR] [--wall-s 30] [--overwrite]

The working code is a repository at a commit (`--git`, data/inject/repository.py: its Python
sources outside test folders, or under `--paths`; its test files are the suite, run in the
environment its commit declares, derived as data.validate derives it) or each instance of
`--data` after its fix, with its test patch (an instance whose snapshot is its files: the demo
set). The rules injector (data/inject/injector.py) draws `--per-repo` / `--per-instance` bugs
per source, each of `--combine` mutations (data/inject/mutations.py: operators, comparisons,
conditions, off-by-one, constants, swapped arguments, dropped returns and statements; never in a
test file), and keeps those the tests prove:

    baseline   the suite runs twice on the working code; tests that pass both times are the
               baseline (the rest, failing or flaky, are left out: `baselines` in the manifest)
    bugs       the suite runs twice with each bug: kept when the same baseline tests fail both
               times (FAIL_TO_PASS, at least one) and every other baseline test passes
    inverse    a bug over several files: reverting any one file alone makes some FAIL_TO_PASS
               test pass again (every file matters)
    instances  the same bug twice is kept once (an identical patch, or a near copy by
               data.build's rule over the issue text and the patch: `--near-dup-threshold`);
               with --git the bug is committed into the clone (refs/swe-rl/inject/<id>) and is
               the instance's base commit

Kept instances are schema-v3 Parquet shards under `--out` that every reward kind and evaluation
mode takes (`problem_source` "injected:rules:<ops>"; an instance of `--git` has no test patch:
its tests are the files its labels name, already at its commit, and the runners need the clone,
`reward.execution.repos=[OWNER/NAME=CLONE]`); `_manifest.json` has the funnel (sources,
baselines, candidates, kept, each rejection reason with examples) and the seconds per stage.

Tests run in the sandbox on the test-runner pool (`--workers` runners on a local Ray, or the
cluster at `--ray-address`), or `--workers 0` one by one in this process. `--wall-s` bounds
each run: a bug that loops forever costs that much, twice, and is rejected (`run_failed`). The
injector's logic is data/inject/injector.py and repository.py; this command runs its tests
(`inject`: baseline, bug and inverse-check runs on `pool`, anything with `run(jobs, what) ->
runs` in order: the test-runner pool, or `InProcess(Runner)`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from actors.cluster.join import ray_session
from conf import logs
from conf.config import ExecutionConfig, ModelConfig
from conf.errors import UserError, fail
from conf.progress import Progress
from data.git.repo import GitError, parse_clone
from data.inject.injector import (
    BugCandidate,
    BugOutcome,
    as_instance,
    buggy_tree,
    candidates,
    prove,
    tree_patch,
    working_tree,
)
from data.inject.model_bugs import bug_from_files, bug_messages
from data.inject.mutations import OPERATORS
from data.inject.repository import GitSource, bug_instance, read_source
from data.loader import read_instances
from data.mining.filters import FilterConfig
from data.mining.neardup import NearDuplicates
from data.schema import Instance
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.apply import apply_edits
from reward.execution.environments import EnvSpec, derive_spec
from reward.execution.pool import TestPool
from reward.execution.runner import Runner, TestJob, TestRun
from reward.execution.snapshots import Snapshots, SnapshotUnavailable
from reward.parse import Rejected, parse_output

EXAMPLES = 5  # per reason, in the manifest
REPEATS = 2  # runs of every tree: a bug's failures must repeat to count


class InProcess:
    """The pool's interface over one Runner in this process."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def run(self, jobs: Sequence[TestJob], what: str = "test runs") -> list[TestRun]:
        with Progress("inject", what, len(jobs)) as progress:
            out = []
            for job in jobs:
                out.append(self.runner.run(job))
                progress.update(1)
        return out


Source = Instance | GitSource  # an instance's fixed code (--data) or a repository at a commit (--git)


def _instance(source: Source) -> Instance:
    return source.instance if isinstance(source, GitSource) else source


def _job(source: Source, tree: dict[str, str], job_id: str) -> TestJob:
    """Tests of `tree` (the repository's files): the source's test patch, or a repository's
    test files at its commit."""
    inst = _instance(source)
    if isinstance(source, GitSource):
        return TestJob(inst, tree_patch(inst, tree), job_id=job_id, tests=source.tests)
    return TestJob(inst, tree_patch(inst, tree), job_id=job_id)


def _passing(runs: Sequence[TestRun]) -> tuple[set[str], str]:
    """The tests that passed in every run, or ("", why) when a run had no outcome."""
    for run in runs:
        if run.status != "ok":
            return set(), f"{run.status}: {run.reason or ''}".strip()
    names = set().union(*(r.outcomes for r in runs))
    return {t for t in names if all(r.outcomes.get(t) == "passed" for r in runs)}, ""


def inject(
    sources: Sequence[Source],
    pool: Any,
    *,
    per_instance: int = 4,
    combine: int = 1,
    seed: int = 0,
    operators: tuple[str, ...] = OPERATORS,
    near_dup_threshold: float = FilterConfig.near_dup_threshold,
    relevant_files: int = 3,
    draw: Draw | None = None,
    seconds: dict[str, float] | None = None,
    baselines_out: dict[str, dict[str, int]] | None = None,
) -> list[BugOutcome]:
    """Every source's outcome (when it was rejected) and every candidate's, in order; the
    seconds of each stage (baseline, bugs, inverse) go into `seconds`, and each source's
    baseline (tests passing both times, and those left out: failing or flaky) into
    `baselines_out`, when given. `draw` writes the bugs of the sources whose baseline passed
    (default: the rules injector's seeded mutations, `per_instance` per source)."""
    if draw is None:
        draw = rules_draw(per_instance, combine, seed, operators)
    seconds = {} if seconds is None else seconds
    clock = time.monotonic()
    outcomes: list[BugOutcome] = []
    usable: list[Source] = []
    for source in sources:
        inst = _instance(source)
        spec = (EnvSpec.from_json(inst.environment) if inst.environment else None) or EnvSpec()
        if isinstance(source, GitSource):
            usable.append(source)
        elif spec.snapshot != "files":
            why = "a git instance's fixed code is no commit: give its repository with --git"
            outcomes.append(BugOutcome(None, inst.instance_id, "git_snapshot", detail=why))
        elif not inst.test_patch:
            outcomes.append(BugOutcome(None, inst.instance_id, "no_tests"))
        else:
            usable.append(source)
    jobs = [
        _job(src, working_tree(_instance(src)), f"{i}/base/{r}") for i, src in enumerate(usable) for r in range(REPEATS)
    ]
    runs = pool.run(jobs, what="baseline runs")
    seconds["baseline"], clock = time.monotonic() - clock, time.monotonic()
    baselines: dict[int, set[str]] = {}
    for i, src in enumerate(usable):
        inst = _instance(src)
        base_runs = runs[i * REPEATS : (i + 1) * REPEATS]
        passing, why = _passing(base_runs)
        if baselines_out is not None:
            ran = set().union(*(r.outcomes for r in base_runs))
            baselines_out[inst.instance_id] = {"passing": len(passing), "left_out": len(ran - passing)}
        if not passing:
            outcomes.append(BugOutcome(None, inst.instance_id, "baseline_failed", detail=why or "no test passes"))
            continue
        baselines[i] = passing
    drawn, unusable = draw([_instance(usable[i]) for i in baselines])
    outcomes += unusable
    bugs = [(i, c) for i, found in zip(baselines, drawn, strict=True) for c in found]
    seconds["draw"], clock = time.monotonic() - clock, time.monotonic()
    jobs = [
        _job(usable[i], buggy_tree(c.source, c.bug), f"{j}/bug/{r}")
        for j, (i, c) in enumerate(bugs)
        for r in range(REPEATS)
    ]
    runs = pool.run(jobs, what="bug runs")
    seconds["bugs"], clock = time.monotonic() - clock, time.monotonic()
    proved = []
    for j, (i, cand) in enumerate(bugs):
        bug_runs = runs[j * REPEATS : (j + 1) * REPEATS]
        reason, f2p, detail = prove(cand, baselines[i], bug_runs)
        if reason != "kept":
            outcomes.append(BugOutcome(cand, cand.source.instance_id, reason, detail=detail))
        else:
            proved.append(Proved(usable[i], cand, f2p, baselines[i], bug_runs))
    seconds["inverse"], clock = time.monotonic() - clock, time.monotonic()
    useless = _inverse_checked(proved, pool)
    seconds["inverse"] += time.monotonic() - clock
    clock = time.monotonic()
    outcomes += _kept(proved, useless, near_dup_threshold, relevant_files)
    seconds["instances"] = time.monotonic() - clock
    return outcomes


# Sources in, each one's bugs out (in order), with the answers that gave no bug as outcomes.
Draw = Callable[[list[Instance]], tuple[list[list[BugCandidate]], list[BugOutcome]]]


def rules_draw(per_instance: int, combine: int, seed: int, operators: tuple[str, ...]) -> Draw:
    def draw(sources: list[Instance]) -> tuple[list[list[BugCandidate]], list[BugOutcome]]:
        return [candidates(inst, per_instance, combine, seed, operators) for inst in sources], []

    return draw


class Sampler(Protocol):
    """What writes the model injector's answers: n samples per conversation (ContextEngine)."""

    def sample(
        self, ids: list[str], messages: list[list[dict[str, str]]], n: int, temperature: float
    ) -> list[list[str]]: ...


def model_draw(sampler: Sampler, per_source: int, temperature: float, seed: int) -> Draw:
    """The policy writes `per_source` bugs per source (data/inject/model_bugs.py's prompt); an
    answer is read by the reward's own rules (rules 1-3), so a malformed one is rejected as a
    malformed fix would be, and one that edits a test file, no file or a file that is not the
    repository's Python code is rejected with that reason."""

    def draw(sources: list[Instance]) -> tuple[list[list[BugCandidate]], list[BugOutcome]]:
        trees = [working_tree(inst) for inst in sources]
        messages = [bug_messages(inst, tree, seed) for inst, tree in zip(sources, trees, strict=True)]
        answers = sampler.sample([inst.instance_id for inst in sources], messages, per_source, temperature)
        drawn: list[list[BugCandidate]] = []
        rejected: list[BugOutcome] = []
        for inst, tree, texts in zip(sources, trees, answers, strict=True):
            found: list[BugCandidate] = []
            if not texts:
                rejected.append(BugOutcome(None, inst.instance_id, "prompt_too_long"))
            for text in texts:
                try:
                    applied = apply_edits(tree, parse_output(text))
                    bug, why = bug_from_files(tree, applied.new_content)
                    reason = "edits_outside_code" if why else ""
                except Rejected as exc:
                    bug, why = (), exc.reason
                    reason = "malformed" if not exc.format_ok else "edit_failed"
                if bug:
                    found.append(BugCandidate(inst, bug))
                else:
                    rejected.append(BugOutcome(BugCandidate(inst, ()), inst.instance_id, reason, detail=why[:200]))
            drawn.append(found)
        return drawn, rejected

    return draw


@dataclass(frozen=True)
class Proved:
    """A bug whose failures the tests showed twice: its source, FAIL_TO_PASS, baseline, runs."""

    source: Source
    candidate: BugCandidate
    fail_to_pass: set[str]
    baseline: set[str]
    runs: Sequence[TestRun]


def _inverse_checked(proved: list[Proved], pool: Any) -> dict[int, str]:
    """Index -> a file that does not matter, of the proved bugs over several files: reverting it
    alone leaves every FAIL_TO_PASS test failing (a one-file bug needs no check)."""
    jobs, owners = [], []
    for j, p in enumerate(proved):
        paths = sorted({m.path for m in p.candidate.bug})
        if len(paths) < 2:
            continue
        for path in paths:
            rest = [m for m in p.candidate.bug if m.path != path]
            jobs.append(_job(p.source, buggy_tree(p.candidate.source, rest), f"{j}/revert/{path}"))
            owners.append((j, path))
    runs = pool.run(jobs, what="inverse checks") if jobs else []
    useless: dict[int, str] = {}
    for (j, path), run in zip(owners, runs, strict=True):
        if run.status != "ok" or not any(run.outcomes.get(t) == "passed" for t in proved[j].fail_to_pass):
            useless.setdefault(j, path)
    return useless


def _kept(
    proved: list[Proved], useless: dict[int, str], near_dup_threshold: float, relevant_files: int
) -> list[BugOutcome]:
    """The proved bugs whose every file matters, as instances; the same bug twice (an exact
    patch, or a near copy by data.build's rule over the issue text and the patch) once."""
    out = []
    kept_by_source: dict[str, int] = {}
    seen_patches: set[str] = set()
    near = NearDuplicates(near_dup_threshold) if near_dup_threshold > 0 else None
    for j, p in enumerate(proved):
        cand, src_id = p.candidate, p.candidate.source.instance_id
        if j in useless:
            out.append(BugOutcome(cand, src_id, "file_does_not_matter", detail=useless[j]))
            continue
        k = kept_by_source.get(src_id, 0)
        inst = as_instance(cand, k, p.fail_to_pass, p.baseline, p.runs)
        if inst.patch in seen_patches:  # the same bug drawn twice (two mutations with one effect)
            out.append(BugOutcome(cand, src_id, "duplicate"))
            continue
        verdict, like = near.check(inst.instance_id, inst.problem_statement, inst.patch) if near else ("kept", "")
        if verdict != "kept":
            out.append(BugOutcome(cand, src_id, "near_duplicate", detail=like))
            continue
        seen_patches.add(inst.patch)
        if isinstance(p.source, GitSource):  # its buggy tree becomes a commit of the clone
            inst = bug_instance(p.source, cand, k, p.fail_to_pass, p.baseline, list(p.runs), relevant_files)
        kept_by_source[src_id] = k + 1
        out.append(BugOutcome(cand, src_id, "kept", inst))
    return out


def git_sources(
    entries: Sequence[str], commit: str, paths: tuple[str, ...], cfg: ExecutionConfig, environment: str = "derive"
) -> list[GitSource]:
    """Each `--git` repository at `commit` in `environment`: "derive", the one its snapshot
    declares there (derive_spec, as data.validate derives one: its dependencies as of the
    commit's date), or an EnvSpec as JSON (its snapshot is always the commit)."""
    given = None
    if environment != "derive":
        try:
            given = replace(EnvSpec.from_json(environment) or EnvSpec(), snapshot="git")
        except (ValueError, TypeError) as exc:
            raise UserError(f"--environment: not 'derive' or an EnvSpec as JSON: {exc}") from None
    snapshots = Snapshots(Path(cfg.cache_dir).expanduser().resolve() / "snapshots", list(entries))
    out = []
    for entry in entries:
        name, clone = parse_clone(entry)
        if name is None:
            raise UserError(f"--git {entry}: name the repository, as owner/name=CLONE")
        try:
            source = read_source(name, clone, commit, paths)
            snapshot = snapshots.path(source.instance, EnvSpec(snapshot="git"))
        except (GitError, ValueError, SnapshotUnavailable) as exc:
            raise UserError(f"--git {entry}: {exc}") from None
        spec = given or derive_spec(snapshot, source.instance.created_at)
        out.append(replace(source, instance=replace(source.instance, environment=spec.to_json())))
    return out


def _engine(args: argparse.Namespace, on_ray: bool) -> Any:
    """The policy that writes bugs: one engine (a rollout actor when on Ray), as data.build's
    `--context model` starts one."""
    # The engine sits in actors/, above data/ in the layers: only the model injector needs it,
    # so a rules run never imports vLLM.
    from actors.rollout.context_engine import ContextEngine
    from data.mining.context_step import ContextConfig

    model_cfg = ContextConfig(mode="model", model=args.model, max_new_tokens=args.max_new_tokens, batch=64)
    return ContextEngine(args.model, model_cfg.engine(), dtype=model_cfg.dtype, seed=args.seed, on_ray=on_ray)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m data.inject",
        description=__doc__.split("\n\n")[0],
        epilog="Give --data (instances' fixed code) or --git (repositories at --commit).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--data", help="validated instances whose snapshot is their files: a Parquet file or directory, or 'demo'"
    )
    src.add_argument(
        "--git",
        action="append",
        metavar="OWNER/NAME=CLONE",
        help="a repository's clone (plain or bare; repeatable): its code at --commit, its tests the baseline",
    )
    p.add_argument("--commit", default="HEAD", help="with --git: the commit (a ref or id) to break (default HEAD)")
    p.add_argument(
        "--paths",
        default="",
        help="with --git: comma-separated folders whose Python files may change (default: all code)",
    )
    p.add_argument(
        "--environment",
        default="derive",
        help="with --git: 'derive' (the one the commit declares, as data.validate derives it) or an EnvSpec as JSON",
    )
    p.add_argument("--out", required=True, help="output directory: v3 shards and _manifest.json")
    p.add_argument(
        "--per-instance",
        "--per-repo",
        dest="per_source",
        type=int,
        default=4,
        help="bugs drawn per instance (--data) or per repository (--git) (default 4)",
    )
    p.add_argument("--combine", type=int, default=1, help="mutations per bug (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seeds the draws (default 0)")
    p.add_argument("--operators", default=",".join(OPERATORS), help=f"comma-separated, of {', '.join(OPERATORS)}")
    p.add_argument(
        "--injector",
        choices=("rules", "model"),
        default="rules",
        help="who writes the bugs: rules (seeded AST mutations) or model (the policy, as SEARCH/REPLACE edits)",
    )
    p.add_argument(
        "--model",
        default=ModelConfig.name,
        help=f"with --injector model: a known name or a HF directory (default {ModelConfig.name})",
    )
    p.add_argument(
        "--temperature", type=float, default=1.0, help="with --injector model: sampling temperature (default 1.0)"
    )
    p.add_argument(
        "--max-new-tokens", type=int, default=1024, help="with --injector model: answer length limit (default 1024)"
    )
    p.add_argument(
        "--near-dup-threshold",
        type=float,
        default=FilterConfig.near_dup_threshold,
        help="a kept bug this similar to an earlier one (issue text and patch; data.build's rule) "
        f"is dropped (default {FilterConfig.near_dup_threshold}; 0 = off)",
    )
    p.add_argument(
        "--relevant-files",
        type=int,
        default=3,
        help="with --git: unchanged files added to each code context (default 3)",
    )
    p.add_argument("--workers", type=int, default=2, help="test runners on a local Ray; 0 = in this process")
    p.add_argument("--ray-address", default="", help="join this Ray cluster instead of starting one")
    p.add_argument("--limit", type=int, default=0, help="with --data: use at most this many instances (0 = all)")
    p.add_argument("--wall-s", type=float, default=30.0, help="wall clock of one test run (default 30)")
    p.add_argument("--cache-dir", default=ExecutionConfig.cache_dir, help="environments and snapshots")
    p.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.setup()
    operators = tuple(o.strip() for o in args.operators.split(",") if o.strip())
    unknown = sorted(set(operators) - set(OPERATORS))
    if unknown or not operators:
        fail(parser.prog, f"--operators: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(OPERATORS)}")
    if args.per_source < 1 or args.combine < 1 or args.workers < 0 or args.wall_s <= 0:
        fail(parser.prog, "--per-instance/--per-repo and --combine must be >= 1, --workers >= 0, --wall-s > 0")
    if not 0 <= args.near_dup_threshold <= 1 or args.relevant_files < 0:
        fail(parser.prog, "--near-dup-threshold must be in [0, 1] (0 = off), --relevant-files >= 0")
    git = list(args.git or ())
    cfg = ExecutionConfig(
        num_runners=max(args.workers, 1), num_cpus=1.0, cache_dir=args.cache_dir, wall_s=args.wall_s, repos=git
    )
    started = time.monotonic()
    try:
        paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
        sources: list[Source] = (
            list(git_sources(git, args.commit, paths, cfg, args.environment))
            if git
            else list(read_instances(args.data, args.limit))
        )
        out = prepare_output(args.out, args.overwrite)
    except (UserError, OSError, ValueError) as exc:
        fail(parser.prog, str(exc))
    options = {"per_instance": args.per_source, "combine": args.combine, "seed": args.seed, "operators": operators}
    extra = {"near_dup_threshold": args.near_dup_threshold, "relevant_files": args.relevant_files}
    seconds: dict[str, float] = {"sources": time.monotonic() - started}
    baselines: dict[str, dict[str, int]] = {}
    on_ray = args.workers > 0 or bool(args.ray_address)
    with ray_session(args.ray_address, args.workers) if on_ray else nullcontext():
        engine = _engine(args, on_ray) if args.injector == "model" else None
        pool = TestPool(cfg) if on_ray else InProcess(Runner(cfg))
        draw = model_draw(engine, args.per_source, args.temperature, args.seed) if engine else None
        try:
            outcomes = inject(sources, pool, **options, **extra, draw=draw, seconds=seconds, baselines_out=baselines)
        finally:
            if engine is not None:
                engine.close()
            if isinstance(pool, TestPool):
                pool.shutdown()
    counts = Counter(o.reason for o in outcomes)
    examples: dict[str, list[str]] = defaultdict(list)
    by_operator: Counter[str] = Counter()
    with ShardWriter(out, shard_size=1000) as writer:
        for o in outcomes:
            label = (
                o.source_id
                + (f" [{o.candidate.operators}]" if o.candidate else "")
                + (f": {o.detail}" if o.detail else "")
            )
            if len(examples[o.reason]) < EXAMPLES:
                examples[o.reason].append(label)
            if o.instance is not None:
                writer.write(o.instance.to_row())
                by_operator[o.candidate.operators if o.candidate else ""] += 1
    elapsed = time.monotonic() - started
    manifest = {
        "source": args.data or git,
        "commit": {_instance(s).repo: _instance(s).base_commit for s in sources} if git else None,
        "injector": args.injector,
        "options": {**options, **extra, "operators": list(operators), "wall_s": args.wall_s, "paths": list(paths)},
        "sources": len(sources),
        "baselines": baselines,
        "candidates": sum(1 for o in outcomes if o.candidate is not None),
        "kept": counts["kept"],
        "counts": dict(sorted(counts.items())),
        "kept_by_operator": dict(sorted(by_operator.items())),
        "examples": dict(examples),
        "shards": writer.shards,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "elapsed_s": round(elapsed, 1),
        "seconds_per_kept": round(elapsed / counts["kept"], 1) if counts["kept"] else None,
    }
    write_manifest(out, manifest)
    keys = ("sources", "candidates", "kept", "counts", "elapsed_s", "seconds_per_kept")
    print(json.dumps({k: manifest[k] for k in keys}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
