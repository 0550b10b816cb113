"""`python -m data.inject`: validated instances made by injecting bugs into working code.

    python -m data.inject "reward.execution.repos=['OWNER/NAME=CLONE',...]" [--commit REF] [--paths src/pkg]
        --out DIR [--per-repo 4] [--environment derive|JSON] [--relevant-files 3] ...
    python -m data.inject --data demo --out DIR [--per-instance 4] [--limit N] ...
        ... [--combine 1] [--seed 0] [--operators binop,compare,...] [--sites covered|all] [--near-dup-threshold 0.8]
        [--injector rules|model [model.name=M rollout.temperature=1.0 rollout.max_new_tokens=1024]]
        [--issue-model [M]]
        [reward.execution.num_runners=2 | ray.address=ADDR] [reward.execution.wall_s=30] [--overwrite]

The working code is a repository at a commit (`reward.execution.repos`, the clones, as the
training schema names them; data/bugs/repository.py: its Python
sources outside test folders, or under `--paths`, or a JavaScript/TypeScript repository's
JavaScript and TypeScript ones; its test files are the suite, run in the environment its commit
declares, derived as data.validate derives it) or each instance of
`--data` after its fix, with its test patch (an instance whose snapshot is its files: the demo
set). The rules injector (data/bugs/injector.py) draws `--per-repo` / `--per-instance` bugs
per source, each of `--combine` mutations (data/bugs/mutations.py: operators, comparisons,
conditions, off-by-one, constants, swapped arguments, dropped returns and statements; the same on
JavaScript/TypeScript, js_mutations.py; never in a test file) on the lines the baseline's tests
execute (`--sites covered`: its first run measures them with coverage.py in the sandbox,
reward/execution/coverage.py; `all`: any line), and keeps those the tests prove:

    baseline   the suite runs twice on the working code; tests that pass both times are the
               baseline (the rest, failing or flaky, are left out: `baselines` in the manifest)
    bugs       the suite runs twice with each bug: kept when the same baseline tests fail both
               times (FAIL_TO_PASS, at least one) and every other baseline test passes
    inverse    a bug over several files: reverting any one file alone makes some FAIL_TO_PASS
               test pass again (every file matters)
    instances  the same bug twice is kept once (an identical patch, or a near copy by
               data.build's rule over the issue text and the patch: `--near-dup-threshold`);
               with a clone the bug is committed into the clone (refs/swe-rl/inject/<id>) and is
               the instance's base commit

Kept instances are schema-v3 Parquet shards under `--out` that every reward kind and evaluation
mode takes (`problem_source` "injected:rules:<ops>"; an instance of a clone has no test patch:
its tests are the files its labels name, already at its commit, and the runners need the clone,
`reward.execution.repos=[OWNER/NAME=CLONE]`). Their issue is the failing tests' report, or with
`--issue-model` a user's bug report a model writes from it (data/bugs/issues.py: kept only when
it quotes no line of the fix; else the test report stays, counted under `issues`). The model
injector's engine takes training's keys (`model.*`, and of `rollout.*` those that set one
engine: conf/overrides.py ENGINE_KEYS); `--model`, `--temperature`, `--max-new-tokens` are
refused with their new names.
`_manifest.json` has the funnel (sources, baselines, candidates, kept, each rejection reason
with examples) and the seconds per stage; with `--environment derive`, `environments` has one
line per repository (also printed as it is derived) and `_environments.json` beside it the
whole record of each derivation: the interpreter and requirement set chosen, the test command,
every attempt with its stage, its error's first lines and seconds, the baseline's counts
(reward/execution/derivation.py; docs/execution.md).

Tests run in the sandbox on the test-runner pool (`reward.execution.num_runners` runners on a
local Ray, or the cluster at `ray.address`), or `reward.execution.num_runners=0` one by one in
this process: training's keys, as `key=value` (conf/overrides.py: every `reward.execution.*`;
`--git`, `--workers`, `--wall-s`, `--cache-dir`, `--ray-address` are refused with their new
names). `reward.execution.wall_s` (here 30 s unless given, not training's 300) is the least wall clock
of each run: a run's wall follows what its source's tests took on the working code (the
derivation's baseline run, then the injector's own: reward/execution/walls.py, 4x that at least),
and a run that times out runs once more with its wall doubled before it counts; a bug that loops
forever costs that, twice, and is rejected (`run_failed`). The injector's
logic is data/bugs/injector.py and repository.py; this command runs its tests
(`inject`: baseline, bug and inverse-check runs on `pool`, anything with `run(jobs, what) ->
runs` in order: the test-runner pool, or `InProcess(Runner)`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from actors.cluster.join import ray_session
from conf import logs, overrides
from conf.config import ExecutionConfig, ModelConfig, RolloutConfig
from conf.errors import UserError, fail
from data.bugs.injector import BugOutcome
from data.bugs.issues import IssueReport, write_reports
from data.bugs.mutations import OPERATORS
from data.bugs.proof import InProcess, Source, inject, instance_of, model_draw
from data.bugs.repository import GitSource, read_source
from data.git.repo import GitError, parse_clone
from data.loader import read_instances
from data.mining.filters import FilterConfig
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.execution.derivation import Deriver, select_tests, write_records
from reward.execution.environments import EnvSpec
from reward.execution.pool import TestPool
from reward.execution.runner import Runner
from reward.execution.snapshots import Snapshots, SnapshotUnavailable

EXAMPLES = 5  # per reason, in the manifest


def git_sources(
    entries: Sequence[str],
    commit: str,
    paths: tuple[str, ...],
    cfg: ExecutionConfig,
    environment: str = "derive",
    deriver: Deriver | None = None,
) -> list[GitSource]:
    """Each clone (reward.execution.repos) at `commit` in `environment`: "derive", the one its snapshot
    declares there, found by building and baselining its candidates (reward/execution/
    derivation.py, as data.validate derives one: its dependencies as of the commit's date; its
    tests narrowed to the repository's own selection), each attempt kept in `deriver`; or an
    EnvSpec as JSON (its snapshot is always the commit)."""
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
            raise UserError(f"reward.execution.repos: {entry}: name the repository, as owner/name=CLONE")
        try:
            source = read_source(name, clone, commit, paths)
            snapshot = snapshots.path(source.instance, EnvSpec(snapshot="git"))
        except (GitError, ValueError, SnapshotUnavailable) as exc:
            raise UserError(f"reward.execution.repos: {entry}: {exc}") from None
        if given is None:
            deriver = deriver or Deriver(cfg)
            derived = deriver.derive(source.instance, snapshot, source.tests)
            tests = select_tests(source.tests, derived.command.paths, derived.command.args)
            source = replace(source, tests=tests, baseline_s=derived.baseline_s)  # the later walls follow it
        spec = given or derived.spec
        out.append(replace(source, instance=replace(source.instance, environment=spec.to_json())))
    return out


def _engine(model: str, engine: Engine, on_ray: bool) -> Any:
    """A model that writes bugs or bug reports: one engine (a rollout actor when on Ray), as
    data.build's `--context model` starts one."""
    # The engine (actors/rollout/: torch and vLLM): only the model's stages need it, so a
    # rules run never imports vLLM.
    from actors.rollout.context_engine import ContextEngine

    return ContextEngine(model, engine.rollout, dtype=engine.model.dtype, seed=engine.seed, on_ray=on_ray)


@dataclass
class Engine:
    """The model injector's engine, in training's names (`model.*`, `rollout.*` overrides)."""

    model: ModelConfig
    rollout: RolloutConfig
    seed: int


# The engine's defaults where they differ from training's: long answers (a bug is SEARCH/REPLACE
# edits with their context), 64 prompts a call.
ENGINE_DEFAULTS = RolloutConfig(max_new_tokens=1024, max_prompts_per_call=64)


def _with_reports(outcomes: list[BugOutcome], engine: Any) -> tuple[list[BugOutcome], list[IssueReport]]:
    """The kept instances with the model's bug reports as their issue text where one was taken
    (data/bugs/issues.py), and every report in order of the kept instances."""
    kept = [o.instance for o in outcomes if o.instance is not None]
    reports = iter(write_reports(kept, engine))
    out, written = [], []
    for o in outcomes:
        if o.instance is None:
            out.append(o)
            continue
        report = next(reports)
        written.append(report)
        if report.reason == "model":
            source = f"{o.instance.problem_source}/issue:model"
            o = replace(o, instance=replace(o.instance, problem_statement=report.text, problem_source=source))
        out.append(o)
    return out, written


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m data.inject",
        description=__doc__.split("\n\n")[0],
        epilog="Give --data (instances' fixed code) or reward.execution.repos=[OWNER/NAME=CLONE,...] (repositories "
        "at --commit: each clone, plain or bare, its tests the baseline); and key=value overrides of "
        "reward.execution.* and ray.address, as in training (conf/overrides.py).",
    )
    p.add_argument(
        "--data", help="validated instances whose snapshot is their files: a Parquet file or directory, or 'demo'"
    )
    p.add_argument("--commit", default="HEAD", help="with clones: the commit (a ref or id) to break (default HEAD)")
    p.add_argument(
        "--paths",
        default="",
        help="with clones: comma-separated folders whose Python files may change (default: all code)",
    )
    p.add_argument(
        "--environment",
        default="derive",
        help="with clones: 'derive' (the one the commit declares, as data.validate derives it) or an EnvSpec as JSON",
    )
    p.add_argument("--out", required=True, help="output directory: v3 shards and _manifest.json")
    p.add_argument(
        "--per-instance",
        "--per-repo",
        dest="per_source",
        type=int,
        default=4,
        help="bugs drawn per instance (--data) or per repository (clones) (default 4)",
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
        "--issue-model",
        nargs="?",
        const="",
        default=None,
        metavar="NAME_OR_DIR",
        help="a model writes each kept bug's issue as a user's bug report from the failing tests' report "
        "(greedy; alone: model.name's); a report that quotes a line of the fix keeps the test report",
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
        help="with clones: unchanged files added to each code context (default 3)",
    )
    p.add_argument(
        "--sites",
        choices=("covered", "all"),
        default="covered",
        help="rules bugs on the lines the baseline's tests execute (covered: its first run measures them "
        "with coverage.py) or on any line (all)",
    )
    p.add_argument("--limit", type=int, default=0, help="with --data: use at most this many instances (0 = all)")
    p.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:  # a short wall clock per run: a bug that loops forever costs it twice
        base = ExecutionConfig(wall_s=30.0)
        sections = overrides.pool_sections(base) | {"model": ModelConfig(), "rollout": ENGINE_DEFAULTS}
        former = overrides.FORMER_FLAGS | overrides.ENGINE_FLAGS
        argv = sys.argv[1:] if argv is None else argv
        rest, typed = overrides.parse(argv, parser.prog, sections, former, engine=overrides.ENGINE_KEYS)
        cfg, ray_address = overrides.check_pool(typed["reward"].execution), typed["ray"].address
    except UserError as exc:
        fail(parser.prog, str(exc))
    args = parser.parse_args(rest)
    engine_cfg = Engine(typed["model"], typed["rollout"], args.seed)
    git = list(cfg.repos)
    if bool(args.data) == bool(git):
        fail(parser.prog, "give --data (instances' fixed code) or reward.execution.repos=[OWNER/NAME=CLONE] (not both)")
    logs.setup()
    operators = tuple(o.strip() for o in args.operators.split(",") if o.strip())
    unknown = sorted(set(operators) - set(OPERATORS))
    if unknown or not operators:
        fail(parser.prog, f"--operators: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(OPERATORS)}")
    if args.per_source < 1 or args.combine < 1:
        fail(parser.prog, "--per-instance/--per-repo and --combine must be >= 1")
    if not 0 <= args.near_dup_threshold <= 1 or args.relevant_files < 0:
        fail(parser.prog, "--near-dup-threshold must be in [0, 1] (0 = off), --relevant-files >= 0")
    workers = cfg.num_runners
    cfg = replace(cfg, num_runners=max(workers, 1))
    started = time.monotonic()
    deriver = Deriver(cfg) if git and args.environment == "derive" else None
    try:
        paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
        sources: list[Source] = (
            list(git_sources(git, args.commit, paths, cfg, args.environment, deriver))
            if git
            else list(read_instances(args.data, args.limit))
        )
        out = prepare_output(args.out, args.overwrite)
    except (UserError, OSError, ValueError) as exc:
        fail(parser.prog, str(exc))
    options = {"per_instance": args.per_source, "combine": args.combine, "seed": args.seed, "operators": operators}
    options["sites"] = args.sites
    extra = {"near_dup_threshold": args.near_dup_threshold, "relevant_files": args.relevant_files}
    seconds: dict[str, float] = {"sources": time.monotonic() - started}
    if deriver is not None:  # of which deriving the environments: builds and one baseline run each
        seconds["environments"] = sum(a.seconds for d in deriver.derivations for a in d.attempts)
    baselines: dict[str, dict[str, int]] = {}
    on_ray = workers > 0 or bool(ray_address)
    model = engine_cfg.model.name
    issue_model = None if args.issue_model is None else args.issue_model or model
    reports: list[IssueReport] = []
    with ray_session(ray_address, workers) if on_ray else nullcontext():
        engine = _engine(model, engine_cfg, on_ray) if args.injector == "model" else None
        try:
            pool = TestPool(cfg) if on_ray else InProcess(Runner(cfg))
            draw = model_draw(engine, args.per_source, engine_cfg.rollout.temperature, args.seed) if engine else None
            try:
                outcomes = inject(
                    sources, pool, **options, **extra, draw=draw, seconds=seconds, baselines_out=baselines
                )
            finally:
                if isinstance(pool, TestPool):  # its runners' CPUs go back before a report engine starts
                    pool.shutdown()
            if issue_model is not None:
                if engine is None or issue_model != model:  # one engine at a time: CPU memory
                    if engine is not None:
                        engine.close()
                        engine = None  # closed once, even should the next one fail to start
                    engine = _engine(issue_model, engine_cfg, on_ray)
                clock = time.monotonic()
                outcomes, reports = _with_reports(outcomes, engine)
                seconds["issues"] = time.monotonic() - clock
        finally:
            if engine is not None:
                engine.close()
    counts = Counter(o.reason for o in outcomes)
    examples: dict[str, list[str]] = defaultdict(list)
    for r in reports:
        if r.reason != "model" and len(examples[f"issue_{r.reason}"]) < EXAMPLES:
            examples[f"issue_{r.reason}"].append(r.detail)
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
        "commit": {instance_of(s).repo: instance_of(s).base_commit for s in sources} if git else None,
        "injector": args.injector,
        "options": {**options, **extra, "operators": list(operators), "wall_s": cfg.wall_s, "paths": list(paths)},
        "sources": len(sources),
        "baselines": baselines,
        "candidates": sum(1 for o in outcomes if o.candidate is not None),
        "kept": counts["kept"],
        "counts": dict(sorted(counts.items())),
        "kept_by_operator": dict(sorted(by_operator.items())),
        "issue_model": issue_model,
        "issues": dict(sorted(Counter(r.reason for r in reports).items())) if issue_model is not None else None,
        "examples": dict(examples),
        "shards": writer.shards,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "elapsed_s": round(elapsed, 1),
        "seconds_per_kept": round(elapsed / counts["kept"], 1) if counts["kept"] else None,
    }
    if deriver is not None:
        manifest["environments"] = [d.summary() for d in deriver.derivations]
        write_records(out, deriver.derivations)
    write_manifest(out, manifest)
    keys = ("sources", "candidates", "kept", "counts", "elapsed_s", "seconds_per_kept")
    print(json.dumps({k: manifest[k] for k in keys}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
