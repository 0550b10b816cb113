"""`python -m data.build`: mine merged pull requests (or SWE-bench rows) into Parquet shards.

    python -m data.build --git PATH [--repo owner/name] [--issues FILE] --out DIR [filters...]
    python -m data.build --swebench FILE [--git PATH --repo owner/name] --out DIR
    python -m data.build ... --workers 2          # mine in Ray tasks on a local Ray (127.0.0.1)
    python -m data.build ... --ray-address auto   # ... on an existing cluster
    python -m data.build ... --exclude-repos swebench.json   # no PR of SWE-bench's repositories
    python -m data.build ... --context model [model.name=M rollout.num_gpus=8 ...]
                                                  # relevant files chosen by a model (the paper's way)

The context model's engine takes training's keys as `key=value` (conf/overrides.py): `model.*`,
and of `rollout.*` those that set one engine (ENGINE_KEYS; `rollout.max_prompts_per_call` is the
questions per generate call, 64 here, `rollout.max_new_tokens` 128 here); the former
`--context-model`, `--context-gpus`, ... flags are refused with their new keys.

Prints progress while it runs and a table of counts per filter at the end; writes the shards
and `_manifest.json` (data/shards.py). Bad input (not a repository, malformed JSON, a missing
field) stops the build with an error naming the file, line or field; a PR that cannot be mined
is skipped and counted. How this departs from the paper: the paper mined 11M PRs from GitHub
events and full clones; this reads local clones and local dumps only (no network).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from actors.cluster.join import ray_session
from conf import overrides
from conf.config import ModelConfig, RolloutConfig
from conf.errors import UserError, fail
from conf.progress import Progress
from data.git.pulls import merged_pull_requests
from data.git.repo import GitError, Repo, parse_clone
from data.mining.context_step import MODES, ContextChooser, ContextConfig
from data.mining.extract import MineJob, Outcome, mine_pr_chunk, mine_row_chunk
from data.mining.filters import FilterConfig, new_counts, summary_table
from data.mining.neardup import NearDuplicates
from data.mining.parallel import chunked, map_in_process, map_on_ray
from data.mining.sources import (
    InputError,
    iter_json_records,
    iter_records,
    iter_swebench_rows,
    read_excluded_repos,
    read_issue_index,
)
from data.schema import SCHEMA_VERSION
from data.shards import ShardWriter, prepare_output, write_manifest

# Skips with a reason of their own (a git error, an unknown commit) shown per reason, and kept
# in the manifest: enough to see what went wrong without a log of every candidate.
EXAMPLES_PER_REASON = 5
PROG = "python -m data.build"  # the name in --help and in its one-line errors


@dataclass(frozen=True)
class BuildConfig:
    # Local clones (plain or bare) whose merged PRs are mined; with `swebench`, the one clone
    # that holds the rows' base commits. `owner/name=PATH` names the repository a clone holds.
    git: tuple[str, ...] = ()
    # "owner/name" of the repository (needs exactly one clone); "" = from the origin remote's
    # URL, else "local/<directory name>".
    repo: str = ""
    # Branch whose first-parent history is walked; "" = origin's default branch, else HEAD.
    branch: str = ""
    # Issue dumps (GitHub REST issue/PR objects or GH Archive events; JSON, JSONL, .gz).
    issues: tuple[str, ...] = ()
    # A SWE-bench-format file (JSON, JSONL or Parquet) to convert instead of mining PRs.
    swebench: str = ""
    # Output directory of the shards and `_manifest.json`.
    out: str = ""
    # Replace a dataset already in `out` (otherwise the build refuses to start).
    overwrite: bool = False
    # Instances per Parquet shard.
    shard_size: int = 1000
    # K: relevant unchanged files added to each context (data/context/imports.py's rule; 0 = none).
    relevant_files: int = 3
    # Files listing instance ids to leave out: text (one id per line) or JSON/JSONL/Parquet
    # rows with an `instance_id` (a SWE-bench file works as is).
    exclude: tuple[str, ...] = ()
    # Files listing repositories none of whose PRs to keep: text (one owner/name per line) or
    # JSON/JSONL/Parquet rows with a `repo` (a SWE-bench file works as is).
    exclude_repos: tuple[str, ...] = ()
    # Stop after this many candidates (PRs or rows); 0 = all.
    limit: int = 0
    # Local Ray CPUs to mine on (0 = in-process, unless `ray_address` is set).
    workers: int = 0
    # Address of an existing Ray cluster ("auto", "ray://host:10001"); "" = none.
    ray_address: str = ""
    # PRs (or rows) per Ray task: a commit range of the first-parent history.
    chunk_size: int = 16
    # The filter switches and limits (data/mining/filters.py).
    filters: FilterConfig = field(default_factory=FilterConfig)
    # How the relevant unchanged files are chosen, and the model that chooses them (data/mining/context_step.py).
    context: ContextConfig = field(default_factory=ContextConfig)


def read_exclusions(paths: tuple[str, ...]) -> frozenset[str]:
    """Instance ids to exclude, from the files `paths` (see BuildConfig.exclude)."""
    ids: set[str] = set()
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: no such file (--exclude)")
        if p.suffix == ".parquet":
            ids.update(row["instance_id"] for _, row in iter_swebench_rows(p))
        elif p.suffix in (".json", ".jsonl", ".gz"):
            ids.update(_ids_of_records(p))
        else:
            lines = p.read_text(encoding="utf-8").splitlines()
            ids.update(ln.strip() for ln in lines if ln.strip() and not ln.startswith("#"))
    return frozenset(ids)


def _ids_of_records(path: Path) -> Iterator[str]:
    for where, rec in iter_json_records(path):
        if not isinstance(rec, dict) or not isinstance(rec.get("instance_id"), str):
            raise InputError(f"{where}: missing field 'instance_id' (--exclude)")
        yield rec["instance_id"]


# GitHub's rule for owner and repository names: letters, digits, '-', '_' and '.'.
def _job(cfg: BuildConfig, repo_name: str) -> MineJob:
    index = read_issue_index(list(cfg.issues), repo_name) if cfg.issues else None
    require = cfg.filters.require_linked_issue
    return MineJob(
        repo_name=repo_name,
        filters=cfg.filters,
        relevant_files=cfg.relevant_files,
        require_issue=bool(cfg.issues) if require is None else require,
        issues=index,
        context_by_model=cfg.context.mode == "model",
    )


def read_reference_rows(paths: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(instance id, problem statement, patch) of the rows of SWE-bench-format files among
    `paths` that carry both texts: the evaluation set the near-duplicate rule keeps away from.
    Text files (lists of ids or repositories) carry no text and give nothing."""
    seen: set[str] = set()
    for path in paths:
        p = Path(path)
        if p.suffix not in (".parquet", ".json", ".jsonl", ".gz"):
            continue
        for where, rec in iter_records(p):
            if not isinstance(rec, dict):
                continue
            name, patch = str(rec.get("instance_id") or where), rec.get("patch", rec.get("golden_patch"))
            if isinstance(rec.get("problem_statement"), str) and isinstance(patch, str) and name not in seen:
                seen.add(name)  # a file given with both flags is read twice
                yield name, rec["problem_statement"], patch


def _near_duplicates(cfg: BuildConfig) -> NearDuplicates | None:
    threshold = cfg.filters.near_dup_threshold
    if threshold == 0:
        return None
    near = NearDuplicates(threshold)
    near.add_references(read_reference_rows((*cfg.exclude, *cfg.exclude_repos)))
    return near


def _validate(cfg: BuildConfig) -> None:
    """Reject out-of-range numbers once, naming the field (the flag is the same name)."""
    positive = {"shard_size": cfg.shard_size, "chunk_size": cfg.chunk_size}
    non_negative = {
        "relevant_files": cfg.relevant_files,
        "limit": cfg.limit,
        "workers": cfg.workers,
        "max_files": cfg.filters.max_files,
        "max_hunks": cfg.filters.max_hunks,
        "max_changed_lines": cfg.filters.max_changed_lines,
        "max_context_chars": cfg.filters.max_context_chars,
        "max_context_tokens": cfg.filters.max_context_tokens,
    }
    for name, value in positive.items():
        if value < 1:
            raise InputError(f"{name} must be >= 1, got {value}")
    for name, value in non_negative.items():
        if value < 0:
            raise InputError(f"{name} must be >= 0 (0 = none / no limit), got {value}")
    _validate_context(cfg.context)
    if not 0 <= cfg.filters.near_dup_threshold <= 1:
        raise InputError(f"near_dup_threshold must be in [0, 1] (0 = off), got {cfg.filters.near_dup_threshold}")
    if not cfg.out:
        raise InputError("--out DIR is required")


def _validate_context(c: ContextConfig) -> None:
    if c.mode not in MODES:
        raise InputError(f"context (--context) must be one of {', '.join(MODES)}, got {c.mode!r}")
    keys = {
        "batch": "rollout.max_prompts_per_call",
        "max_new_tokens": "rollout.max_new_tokens",
        "max_tree_files": "--context-max-tree-files",
        "max_text_chars": "--context-max-text-chars",
        "tensor_parallel_size": "rollout.tensor_parallel_size",
        "kv_cache_gib": "rollout.kv_cache_gib",
    }
    for name, key in keys.items():
        if (value := getattr(c, name)) < 1:
            raise InputError(f"{key} must be >= 1, got {value}")
    if c.max_model_len <= c.max_new_tokens:
        raise InputError(
            f"rollout.max_model_len must exceed rollout.max_new_tokens, got {c.max_model_len} <= {c.max_new_tokens}"
        )
    if c.gpus < 0:
        raise InputError(f"rollout.num_gpus must be >= 0, got {c.gpus}")


def resolve_sources(cfg: BuildConfig) -> list[dict[str, Any]]:
    """One description per input (for the manifest), checking every path up front."""
    if not cfg.git and not cfg.swebench:
        raise InputError("give --git PATH (mine PRs) or --swebench FILE")
    if cfg.repo and len(cfg.git) > 1:
        raise InputError("--repo names one repository: give one --git with it")
    if cfg.swebench and (cfg.issues or len(cfg.git) > 1):
        raise InputError("--swebench takes at most one --git and no --issues")
    out = []
    for entry in cfg.git:
        named, path = parse_clone(entry)  # "owner/name=PATH" names the clone's repository
        with Repo(str(path)) as repo:
            branch = cfg.branch or repo.default_branch()
            head = repo.resolve(branch)
            if head is None:
                raise InputError(f"{path}: branch {branch!r} does not resolve to a commit")
            out.append(dict(git=repo.path, repo=cfg.repo or named or repo.owner_name(), branch=branch, head=head))
    return out


def iter_outcomes(cfg: BuildConfig, sources: list[dict[str, Any]], workers: int) -> Iterator[Outcome]:
    """Every candidate's outcome, in a deterministic order (history order, then file order)."""
    run = partial(map_on_ray, workers=workers) if workers else map_in_process
    if cfg.swebench:
        src = sources[0] if sources else dict(git="", repo=cfg.repo)
        rows = iter_swebench_rows(cfg.swebench)
        rows = itertools.islice(rows, cfg.limit) if cfg.limit else rows
        yield from run(mine_row_chunk, chunked(rows, cfg.chunk_size), src["git"], _job(cfg, src["repo"]))
        return
    left = cfg.limit
    for src in sources:
        with Repo(src["git"]) as repo:
            prs = merged_pull_requests(repo, src["branch"])
            prs = itertools.islice(prs, left) if cfg.limit else prs
            n = 0
            for outcome in run(mine_pr_chunk, chunked(prs, cfg.chunk_size), src["git"], _job(cfg, src["repo"])):
                n += 1
                yield outcome
        left -= n
        if cfg.limit and left <= 0:
            return


def build(cfg: BuildConfig) -> dict[str, Any]:
    """Run the build; return the manifest it wrote."""
    _validate(cfg)
    filters = cfg.filters
    cfg = replace(
        cfg,
        filters=replace(
            filters,
            exclude_ids=filters.exclude_ids | read_exclusions(cfg.exclude),
            exclude_repo_names=filters.exclude_repo_names | read_excluded_repos(cfg.exclude_repos),
        ),
    )
    sources = resolve_sources(cfg)
    near = _near_duplicates(cfg)
    out = prepare_output(cfg.out, cfg.overwrite)
    counts, candidates, started = new_counts(), 0, time.time()
    examples: defaultdict[str, list[str]] = defaultdict(list)
    parallel = bool(cfg.workers or cfg.ray_address)
    with (
        ray_session(cfg.ray_address, cfg.workers) if parallel else nullcontext(0) as workers,
        ShardWriter(out, cfg.shard_size) as writer,
        _chooser(cfg, sources, out, workers) or nullcontext() as chooser,
        # The number of candidates is known only at the end: a count and a rate, no ETA.
        Progress("build", "candidates", None, every_s=5.0) as progress,
    ):
        # Digests of kept patches (20 bytes each) for the duplicate rule; None = rule off.
        seen: set[bytes] | None = set() if cfg.filters.dedupe else None
        for outcome in iter_outcomes(cfg, sources, workers):
            candidates += 1
            reason, detail = _dedupe(outcome, seen, near)
            counts[reason] += 1
            if reason == "kept" and chooser is not None:  # rows keep their order through the chooser
                for row in chooser.add(outcome.instance, ask=outcome.needs_context):  # type: ignore[arg-type]
                    writer.write(row)
            elif reason == "kept":
                writer.write(outcome.instance)  # type: ignore[arg-type]
            elif detail and len(examples[reason]) < EXAMPLES_PER_REASON:
                # Skips that carry a why (git errors, unknown commits, rows of a bad file, the
                # instance a near-duplicate resembles): the first few are shown and kept in the
                # manifest, naming the PR or row.
                examples[reason].append(f"{outcome.instance_id}: {detail}")
                print(f"[build] skipped {outcome.instance_id} ({reason}): {detail}", file=sys.stderr, flush=True)
            progress.update(1, note=f"{counts['kept']} kept")
        for row in chooser.flush() if chooser is not None else ():  # the last, partial batch
            writer.write(row)
    manifest = _manifest(cfg, sources, counts, candidates, writer.shards, started, workers)
    if chooser is not None:
        manifest["context"] = {"mode": "model", "model": cfg.context.model, **chooser.stats.as_dict()}
    if examples:
        manifest["skip_examples"] = dict(examples)
    write_manifest(out, manifest)
    return manifest


def _chooser(cfg: BuildConfig, sources: list[dict[str, Any]], out: Path, workers: int) -> ContextChooser | None:
    """The model step of `--context model` (None otherwise); its engine is a Ray actor when the
    build runs on Ray. The chooser yields rows in the order it got them: the shards keep
    candidate order."""
    if cfg.context.mode != "model" or cfg.relevant_files == 0:
        return None
    from actors.rollout.context_engine import engine_asker  # torch and Ray: only for --context model

    git_of = {str(s["repo"]).lower(): str(s["git"]) for s in sources if s.get("git")}
    start = engine_asker(cfg.context, seed=0, on_ray=bool(workers))
    return ContextChooser(cfg.context, cfg.relevant_files, cfg.filters, git_of, out, start)


def _dedupe(outcome: Outcome, seen: set[bytes] | None, near: NearDuplicates | None) -> tuple[str, str]:
    """(reason, detail) after the duplicate and near-duplicate rules, which need every earlier
    kept instance and so run here, in candidate order: the first kept wins."""
    if outcome.reason != "kept":
        return outcome.reason, outcome.detail
    row = outcome.instance
    assert row is not None  # a kept outcome carries its row
    digest = hashlib.sha1(row["patch"].encode()).digest()
    if seen is not None and digest in seen:
        return "duplicate", ""
    if near is not None:
        reason, detail = near.check(outcome.instance_id, row["problem_statement"], row["patch"])
        if reason != "kept":
            return reason, detail
    if seen is not None:
        seen.add(digest)  # only once kept: a later copy of a dropped patch meets the rules anew
    return "kept", ""


def _manifest(
    cfg: BuildConfig,
    sources: list[dict[str, Any]],
    counts: Counter[str],
    candidates: int,
    shards: list[dict[str, Any]],
    started: float,
    workers: int,
) -> dict[str, Any]:
    config = asdict(cfg)
    config["filters"]["exclude_ids"] = len(cfg.filters.exclude_ids)  # the files are in `exclude`
    config["filters"]["exclude_repo_names"] = sorted(cfg.filters.exclude_repo_names)  # a few names: shown
    config = json.loads(json.dumps(config))  # tuples -> lists: the dict equals the file's contents
    return {
        "schema_version": SCHEMA_VERSION,
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": {
            "kind": "swebench" if cfg.swebench else "git",
            "repositories": sources,
            "issues": list(cfg.issues),
            "swebench": cfg.swebench or None,
        },
        "candidates": candidates,
        "instances": counts["kept"],
        "counts": dict(counts),
        "shards": shards,
        "elapsed_s": round(time.time() - started, 3),
        "parallel": {"mode": "ray" if workers else "in-process", "workers": workers},
        "config": config,
    }


def _parser() -> argparse.ArgumentParser:
    """Flags map one to one onto BuildConfig / FilterConfig fields; their defaults live there."""
    ap = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = ap.add_argument
    add("--git", action="append", help="local clone, plain or bare, or owner/name=PATH (repeatable)")
    add("--repo", help="owner/name (default: origin's URL, then the directory name)")
    add("--branch", help="branch to walk (default: origin's default branch, else HEAD)")
    add("--issues", action="append", help="issue dump: REST issue/PR objects or GH Archive events")
    add("--swebench", help="SWE-bench-format file (JSON, JSONL, Parquet) to convert")
    add("--out", help="output directory")
    add("--overwrite", action="store_true", default=None, help="replace a dataset in --out")
    add("--shard-size", type=int, help="instances per shard")
    add(
        "--relevant-files",
        type=int,
        help=f"K relevant unchanged files per context (0 = none; default: {BuildConfig.relevant_files})",
    )
    add("--exclude", action="append", help="ids to leave out: text file or SWE-bench file")
    add(
        "--exclude-repos",
        action="append",
        metavar="FILE",
        help="drop every PR of these repositories: a SWE-bench file (its `repo` values) or a text "
        "file of owner/name lines; repeatable (default: none)",
    )
    add("--limit", type=int, help="stop after this many candidates")
    add("--workers", type=int, help="mine on a local Ray with this many CPUs")
    add("--ray-address", help="mine on an existing Ray cluster")
    add("--chunk-size", type=int, help="PRs per Ray task")
    flt = ap.add_argument_group("filters (data/mining/filters.py)")
    for name, what in [
        ("bots", "bot PRs"),
        ("require-linked-issue", "PRs without a linked issue"),
        ("empty", "empty PRs"),
        ("tests-only", "tests-only PRs"),
        ("binary", "PRs with binary files"),
        ("undecodable", "PRs with non-UTF-8 files"),
        ("no-code", "PRs touching no code file"),
        ("dedupe", "duplicate patches"),
    ]:
        flt.add_argument(
            f"--filter-{name}", dest=name.replace("-", "_"), action=argparse.BooleanOptionalAction, help=f"drop {what}"
        )
    for name in ("max-files", "max-hunks", "max-changed-lines", "max-context-chars", "max-context-tokens"):
        flt.add_argument(f"--{name}", type=int, help="0 = no limit")
    flt.add_argument("--tokenizer", help="measure the context in this tokenizer's tokens")
    flt.add_argument(
        "--near-dup-threshold",
        type=float,
        metavar="J",
        help="drop an instance whose problem statement + patch reach this MinHash Jaccard similarity with "
        "an evaluation row (--exclude / --exclude-repos files) or a kept instance "
        f"(default: {FilterConfig.near_dup_threshold}; 0 = off)",
    )
    _context_flags(ap.add_argument_group("relevant files (data/mining/context_step.py)"))
    return ap


def _context_flags(grp: argparse._ArgumentGroup) -> None:
    """--context and the --context-* flags, onto ContextConfig's fields (dest context_<field>)."""
    d = ContextConfig()
    grp.add_argument(
        "--context",
        dest="context_mode",
        choices=MODES,
        help="how the K relevant unchanged files are chosen: 'imports' (Python imports, no model) or "
        f"'model' (ask model.name; imports when it names nothing usable) (default: {d.mode})",
    )
    # The engine's settings are training's keys (model.*, rollout.*: parse_args); these two are
    # the questions' own.
    flags: list[tuple[str, type, str]] = [
        ("max-tree-files", int, "candidate files shown per question, nearest the changed files first"),
        ("max-text-chars", int, "characters of the issue and of the patch shown, each"),
    ]
    for name, kind, what in flags:
        field_name = name.replace("-", "_")
        default = getattr(d, field_name)
        grp.add_argument(
            f"--context-{name}",
            dest=f"context_{field_name}",
            type=kind,
            metavar=kind.__name__.upper(),
            help=f"{what} (default: {default})",
        )


def _engine_sections() -> dict[str, Any]:
    """The context engine's `model` and `rollout` sections, defaults from ContextConfig."""
    d = ContextConfig()
    rollout = RolloutConfig(
        max_new_tokens=d.max_new_tokens,
        max_model_len=d.max_model_len,
        num_gpus=d.gpus,
        tensor_parallel_size=d.tensor_parallel_size,
        gpu_memory_utilization=d.gpu_memory_utilization,
        kv_cache_gib=d.kv_cache_gib,
        max_prompts_per_call=d.batch,
    )
    return {"model": ModelConfig(name=d.model, dtype=d.dtype), "rollout": rollout}


def parse_args(argv: list[str] | None = None) -> BuildConfig:
    try:
        argv = sys.argv[1:] if argv is None else argv
        rest, typed = overrides.parse(
            argv, PROG, _engine_sections(), overrides.CONTEXT_FLAGS, engine=overrides.GREEDY_ENGINE_KEYS
        )
    except UserError as exc:
        fail(PROG, str(exc))
    model, ro = typed["model"], typed["rollout"]
    engine = {
        "context_model": model.name,
        "context_dtype": model.dtype,
        "context_batch": ro.max_prompts_per_call,
        "context_max_new_tokens": ro.max_new_tokens,
        "context_max_model_len": ro.max_model_len,
        "context_gpus": ro.num_gpus,
        "context_tensor_parallel_size": ro.tensor_parallel_size,
        "context_gpu_memory_utilization": ro.gpu_memory_utilization,
        "context_kv_cache_gib": ro.kv_cache_gib,
    }
    ns = engine | {k: v for k, v in vars(_parser().parse_args(rest)).items() if v is not None}
    filter_fields = set(FilterConfig.__dataclass_fields__)
    filters = FilterConfig(**{k: v for k, v in ns.items() if k in filter_fields})
    context = ContextConfig(**{k.removeprefix("context_"): v for k, v in ns.items() if k.startswith("context_")})
    build_args: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in ns.items()
        if k not in filter_fields and not k.startswith("context_")
    }
    return BuildConfig(**build_args, filters=filters, context=context)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    try:
        manifest = build(cfg)
    except (UserError, GitError, OSError) as e:  # InputError is a UserError; OutputExistsError an OSError
        fail(PROG, str(e))
    print(summary_table(Counter(manifest["counts"]), manifest["candidates"]))
    print(
        f"{manifest['instances']} instances in {len(manifest['shards'])} shards -> {cfg.out} "
        f"({manifest['elapsed_s']:.1f} s, {manifest['parallel']['mode']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
