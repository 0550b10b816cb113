"""Evaluate a checkpoint: greedy and sampled answers to held-out issues, scored by the SWE-RL reward.

    python -m actors.evaluate checkpoint=runs/default/hf data=demo [split=heldout]
        [heldout_fraction=0.1] [samples=16] [temperature=1.0] [max_new_tokens=512] [out=runs/eval]
    python -m actors.evaluate checkpoint=... data=... --oracle      # harness self-check
    python -m actors.evaluate mode=agentless checkpoint=... data=... [git=CLONE] [localize_top=3]
        [samples=16] [repro_tests=4] [oracle_localize=true] [oracle_repair=true]
    either mode: [engines=1] [engine_gpus=0] [tensor_parallel_size=1] [ray_address=] [test_workers=2]

Two modes. `mode=oracle_context` (the default, described below) is the quick proxy the paper
also reports: the model is handed the oracle's files and scored by the reward. `mode=agentless`
is how the paper measured SWE-bench: localization on the repository's tree, repair with whole
files, reproduction and regression tests, a vote, resolution by the tests; it lives in
actors/agentless.py (its docstring has the stages and summary.json's figures), this module
only parses the shared arguments and dispatches.

The instances are those the trainer holds out with the same `heldout_fraction` (the hash rule
of data.loader.is_heldout; `split=train` gives the others), or all of them when the fraction
is 0; prompts are built as in training (data.prompt) and those over `max_prompt_tokens` are
dropped and counted. One greedy answer and `samples` sampled ones per instance.

Where the work runs (both modes, actors/eval_session.py): generation on `engines` rollout actors
on Ray, started as the trainer starts them (the same vLLM engine set-up, `engine_gpus` GPUs and
`tensor_parallel_size` each; every stage's prompts are shared among them, each request with its
own seed, so the answers do not depend on their number); `engines=0` runs one engine in this
process instead (no Ray start: quicker for small runs on a laptop, and on a single GPU box it
uses this process's GPUs). Tests run on `test_workers` runners of the test-runner pool on the
same Ray. Ray is a local cluster on 127.0.0.1, or the cluster at `ray_address` / RAY_ADDRESS
(`ray job submit`): docs/cluster.md, section 6. summary.json's `engines` records which.

Reported, for greedy and for sampled answers (summary.json):
- format_rate: answers that pass the reward's rules 1-2 (tags, at least one edit);
- apply_rate: answers whose edits all apply, i.e. reward != -1 (the trainer's
  format_error_rate is 1 - apply_rate);
- mean_reward: the SWE-RL reward, with the trainer's time cap per diff pair;
- exact_match_rate: the files the answer changes are exactly the files the oracle changes, with
  exactly the oracle's new content;
- sampled only: any_exact_rate (an instance with at least one exact sample: pass@N on exact
  match) and mean_best_reward (the best of N, averaged over instances).
predictions.jsonl is a SWE-bench predictions file of the greedy answers (`instance_id`,
`model_name_or_path`, `model_patch`: a git-style unified diff of the answer's edits against
the code context, "" for an answer whose edits do not apply), so that the official SWE-bench
harness can run the repositories' tests on them elsewhere (or `python -m reward.execute` here).
answers.jsonl keeps every answer.

When the instances carry tests (FAIL_TO_PASS, schema v3) the answers whose edits apply are also
run against them in the sandbox (`tests=true`, the default; reward/execution/): summary.json's
"tests" holds resolve_rate (the greedy answers that resolve their instance) and resolved_any
(instances with at least one resolving sample: pass@N on the tests).

`--oracle` replaces the model by reward.oracle_answer: format, apply, reward and exact match
must all be 1.0 and every patch must apply (checked here with data.patching.apply_patch,
`patch_roundtrip_failures`), which checks the data, the reward and the diff writer together.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from conf import logs
from conf.config import DataConfig, ModelConfig, RewardConfig, RolloutConfig, TrainConfig, TrainerConfig
from conf.io import atomic_write, write_text
from data.loader import PromptItem, is_heldout, resolve_path, shard_files
from data.patching import PatchError, apply_patch, created_files, files_patch
from data.prompt import build_messages, encode_prompt
from data.schema import Instance
from reward import OracleAnswerError, oracle_answer, oracle_diffs, score_with_oracle_diffs
from reward.apply import apply_edits
from reward.parse import parse_output

if TYPE_CHECKING:
    from actors.eval_session import EvalSession
    from reward.execution.runner import TestJob, TestRun

log = logging.getLogger(__name__)


@dataclass
class EvalConfig:
    # Hugging Face model directory to evaluate (the trainer writes one to <run_dir>/hf).
    checkpoint: str = ""
    # Instances: a Parquet file or directory of the schema, or "demo" (as data.path).
    data: str = DataConfig.path
    # "heldout": the instances training held out; "train": the others (needs heldout_fraction > 0).
    split: str = "heldout"
    # The trainer's data.heldout_fraction; 0 = evaluate every instance.
    heldout_fraction: float = DataConfig.heldout_fraction
    # Prompts longer than this many tokens are dropped and counted (as in training).
    max_prompt_tokens: int = DataConfig.max_prompt_tokens
    # Evaluate at most this many instances (in file order); 0 = all.
    limit: int = 0
    # Sampled answers per instance (the trainer's group size by default).
    samples: int = TrainConfig.group_size
    # Sampling temperature of the sampled answers (greedy ones use none).
    temperature: float = RolloutConfig.temperature
    # Nucleus of the sampled answers (1.0 = off).
    top_p: float = RolloutConfig.top_p
    # Completion length limit in tokens.
    max_new_tokens: int = RolloutConfig.max_new_tokens
    # The engine's context length (prompt + completion).
    max_model_len: int = RolloutConfig.max_model_len
    # Weights dtype of the engines (float32 on CPU, bfloat16 on GPU).
    dtype: str = ModelConfig.dtype
    # vLLM tensor parallel size per engine, as rollout.tensor_parallel_size (GPU only).
    tensor_parallel_size: int = RolloutConfig.tensor_parallel_size
    # Fraction of GPU memory vLLM may use (GPU only).
    gpu_memory_utilization: float = RolloutConfig.gpu_memory_utilization
    # KV cache of a CPU engine in GiB.
    kv_cache_gib: int = RolloutConfig.kv_cache_gib
    # The reward's time cap per diff pair, as in training.
    max_pair_seconds: float = RewardConfig.max_pair_seconds
    # Seeds the engine, each instance's samples and the order of its files in the prompt.
    seed: int = 0
    # Output directory: summary.json, predictions.jsonl, answers.jsonl.
    out: str = "runs/eval"
    # model_name_or_path in the predictions file; "" = the checkpoint path.
    model_name: str = ""
    # Replace the model's answers by the oracle answer (a self-check of data, reward and diffs).
    oracle: bool = False
    # Run the instances' tests on the answers whose edits apply, when the instances carry
    # FAIL_TO_PASS (schema v3): resolve_rate (greedy) and resolved_any (any sample resolves).
    tests: bool = True
    # Test runners for those runs, on the engines' Ray (reward/execution/, actors/test_pool.py);
    # with mode=agentless, 0 runs them one by one in this process.
    test_workers: int = 2
    # Rollout actors that generate, on Ray as in training (actors/engines.py: each stage's
    # prompts are shared among them); 0 = one engine in this process, without Ray.
    engines: int = 1
    # GPUs per rollout actor (= tensor_parallel_size on GPUs; 0 = CPU engines). With engines=0
    # the engine uses whatever this process has.
    engine_gpus: float = RolloutConfig.num_gpus
    # Ray for the engines and the test runners: "" = RAY_ADDRESS if set (`ray job submit`), else a
    # local cluster on 127.0.0.1; "auto" or "ray://..." = join that cluster (as ray.address).
    ray_address: str = ""
    # Seconds an engine's start, or one call of 64 prompts, may take on the fleet.
    timeout_s: float = TrainerConfig.phase_timeout_s
    # "oracle_context": the quick proxy (the oracle's files as context, scored by the reward);
    # "agentless": the paper's Agentless-Mini pipeline on whole repositories, resolved by tests
    # (actors/agentless.py).
    mode: str = "oracle_context"
    # Local clones of the instances' repositories ("PATH" or "owner/name=PATH", as
    # reward.execution.repos): the agentless view of the repository and the sandbox's snapshots.
    git: list[str] = field(default_factory=list)
    # Agentless: files the localization keeps (the top N the model names).
    localize_top: int = 3
    # Agentless: reproduction tests the model writes per instance (0 = none: no repro filter).
    repro_tests: int = 4
    # Agentless self-check: the oracle's changed files as the localization.
    oracle_localize: bool = False
    # Agentless self-check: the oracle's patch as every repair sample; with oracle_localize too,
    # every validated instance must resolve.
    oracle_repair: bool = False


class EvalConfigError(ValueError):
    """A bad argument; the message names it."""


def parse_args(argv: list[str]) -> EvalConfig:
    """`key=value` arguments (and `--oracle`) -> a validated EvalConfig; unknown keys are named.
    `git=PATH` may be repeated, one clone each (as `--git` of reward.execute), or be a list."""
    clones = [a.split("=", 1)[1] for a in argv if a.startswith("git=") and not a.startswith("git=[")]
    argv = [a for a in argv if not a.startswith("git=") or a.startswith("git=[")]
    dotlist = ["oracle=true" if a == "--oracle" else a for a in argv]
    bad = [a for a in dotlist if "=" not in a]
    if bad:
        raise EvalConfigError(
            f"arguments must be key=value, got {bad}; keys: {', '.join(EvalConfig.__dataclass_fields__)}"
        )
    try:
        merged = OmegaConf.merge(OmegaConf.structured(EvalConfig), OmegaConf.from_dotlist(dotlist))
    except OmegaConfBaseException as exc:  # an unknown key or a value of the wrong type
        raise EvalConfigError(f"{exc.full_key}: {str(exc).splitlines()[0]}") from exc
    cfg = OmegaConf.to_object(merged)
    assert isinstance(cfg, EvalConfig)
    cfg.git = [*cfg.git, *clones]
    validate(cfg)
    return cfg


def validate(cfg: EvalConfig) -> None:
    if not cfg.checkpoint:
        raise EvalConfigError("checkpoint=PATH is required (a Hugging Face model directory, e.g. <run_dir>/hf)")
    if not (Path(cfg.checkpoint) / "config.json").is_file():
        raise EvalConfigError(
            f"checkpoint={cfg.checkpoint!r}: no config.json there (not a Hugging Face model directory)"
        )
    if cfg.split not in ("heldout", "train"):
        raise EvalConfigError(f"split={cfg.split!r}: accepted values are 'heldout', 'train'")
    if not 0.0 <= cfg.heldout_fraction < 1.0:
        raise EvalConfigError(f"heldout_fraction={cfg.heldout_fraction}: must be in [0, 1)")
    if cfg.split == "train" and cfg.heldout_fraction == 0:
        raise EvalConfigError("split=train needs heldout_fraction > 0 (with 0 every instance is evaluated)")
    if cfg.samples < 1 or cfg.max_new_tokens < 1 or cfg.limit < 0:
        raise EvalConfigError("samples and max_new_tokens must be >= 1, limit >= 0")
    if cfg.temperature <= 0:
        raise EvalConfigError(f"temperature={cfg.temperature}: must be > 0 (greedy answers are always made too)")
    if cfg.dtype not in ("float32", "bfloat16"):
        raise EvalConfigError(f"dtype={cfg.dtype!r}: accepted values are 'float32', 'bfloat16'")
    if cfg.mode not in ("oracle_context", "agentless"):
        raise EvalConfigError(f"mode={cfg.mode!r}: accepted values are 'oracle_context', 'agentless'")
    if cfg.localize_top < 1 or cfg.repro_tests < 0:
        raise EvalConfigError("localize_top must be >= 1, repro_tests >= 0")
    if cfg.test_workers < (0 if cfg.mode == "agentless" else 1):
        raise EvalConfigError(f"test_workers={cfg.test_workers}: must be >= 1 (>= 0 with mode=agentless)")
    if cfg.engines < 0 or cfg.engine_gpus < 0 or cfg.timeout_s <= 0:
        raise EvalConfigError("engines and engine_gpus must be >= 0, timeout_s > 0")
    if cfg.engine_gpus and (cfg.engines == 0 or cfg.engine_gpus < cfg.tensor_parallel_size):
        raise EvalConfigError(
            f"engine_gpus={cfg.engine_gpus}: GPUs of each rollout actor, so engines >= 1 and at least "
            f"tensor_parallel_size={cfg.tensor_parallel_size} (engines=0 uses this process's GPUs)"
        )
    if cfg.mode != "agentless" and (cfg.oracle_localize or cfg.oracle_repair):
        raise EvalConfigError("oracle_localize and oracle_repair are switches of mode=agentless")


# -- instances --------------------------------------------------------------------------------


@dataclass
class Selection:
    items: list[PromptItem]
    split: str  # "heldout", "train" or "all"
    skipped_other_split: int = 0
    dropped_too_long: int = 0


def select_items(cfg: EvalConfig, tokenizer: Any) -> Selection:
    """The split's instances in file order, as the trainer's loader splits and encodes them."""
    sel = Selection([], cfg.split if cfg.heldout_fraction > 0 else "all")
    for instance in split_instances(cfg, sel):
        ids = encode_prompt(tokenizer, build_messages(instance, cfg.seed))
        if len(ids) > cfg.max_prompt_tokens:
            sel.dropped_too_long += 1
            continue
        sel.items.append(PromptItem(instance, ids))
        if cfg.limit and len(sel.items) >= cfg.limit:
            return sel
    return sel


def split_instances(cfg: EvalConfig, sel: Selection) -> Iterator[Instance]:
    """The instances of sel.split in file order; those of the other split are counted in sel."""
    for shard in shard_files(resolve_path(cfg.data)):
        for i, row in enumerate(pq.read_table(shard).to_pylist()):
            instance = Instance.from_row(row, where=f"{shard}: row {i}")
            if sel.split != "all" and is_heldout(instance.instance_id, cfg.heldout_fraction) != (
                sel.split == "heldout"
            ):
                sel.skipped_other_split += 1
                continue
            yield instance


# -- answers ------------------------------------------------------------------------------------


def oracle_texts(items: list[PromptItem]) -> list[str]:
    """The oracle answer of each instance ("" where the format cannot express the change)."""
    texts = []
    for it in items:
        try:
            texts.append(oracle_answer(it.instance.code_context, it.instance.oracle_new_content))
        except OracleAnswerError as exc:
            log.warning("[eval] %s: no oracle answer (%s)", it.instance_id, exc)
            texts.append("")
    return texts


def generate_texts(session: EvalSession, items: list[PromptItem]) -> tuple[list[str], list[list[str]]]:
    """Greedy and sampled answers, on the session's engines (the trainer's engine set-up)."""
    prompts = [(it.instance_id, it.prompt_ids) for it in items]
    greedy = [texts[0] for texts in session.generate("greedy", prompts, 1, 0.0)]
    return greedy, session.generate("sampled", prompts, session.cfg.samples, session.cfg.temperature)


# -- scoring and patches ------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    reward: float
    error: str | None
    format_ok: bool
    exact: bool
    new_content: dict[str, str] | None  # the files the answer changes; None when it does not apply


def changed_files(context: dict[str, str], files: dict[str, str]) -> dict[str, str]:
    return {p: c for p, c in files.items() if c != context.get(p, "")}


def score(
    context: dict[str, str],
    oracle: dict[str, str],
    oracle_diff: dict[str, str | None],
    text: str,
    max_pair_seconds: float,
) -> Outcome:
    """The SWE-RL reward of one answer, plus whether its edits rebuild exactly the oracle's files."""
    result = score_with_oracle_diffs(context, oracle_diff, text, max_pair_seconds=max_pair_seconds)
    if result.reward == -1.0:
        return Outcome(result.reward, result.error, result.format_ok, False, None)
    applied = apply_edits(context, parse_output(text))  # cannot raise: the reward applied the same edits
    if applied.oversized:
        return Outcome(result.reward, result.error, True, False, None)
    new = changed_files(context, applied.new_content)
    return Outcome(result.reward, result.error, True, new == changed_files(context, oracle), new)


def model_patch(instance: Instance, new_content: dict[str, str] | None) -> str:
    """The answer's edits as one diff against the code context ("" when they do not apply).
    In the schema a deleted file has content "": such a file becomes a deletion."""
    return files_patch(instance.code_context, new_content or {}, created_files(instance.patch))


def patch_roundtrips(instance: Instance, patch: str, new_content: dict[str, str] | None) -> bool:
    """Whether the patch, applied to the code context, gives exactly the answer's files."""
    if not patch:
        return not new_content
    try:
        rebuilt = apply_patch(instance.code_context, patch)
    except PatchError:
        return False
    return rebuilt == new_content


# -- report ---------------------------------------------------------------------------------------


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def rates(outcomes: list[Outcome]) -> dict[str, float]:
    return {
        "answers": len(outcomes),
        "format_rate": _mean([float(o.format_ok) for o in outcomes]),
        "apply_rate": _mean([float(o.reward != -1.0) for o in outcomes]),
        "mean_reward": _mean([o.reward for o in outcomes]),
        "exact_match_rate": _mean([float(o.exact) for o in outcomes]),
    }


def sampled_rates(groups: list[list[Outcome]]) -> dict[str, float]:
    return rates([o for g in groups for o in g]) | {
        "any_exact_rate": _mean([float(any(o.exact for o in g)) for g in groups]),
        "mean_best_reward": _mean([max(o.reward for o in g) for g in groups if g]),
    }


@dataclass
class Report:
    summary: dict[str, Any]
    predictions: list[dict[str, str]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)


def evaluate(cfg: EvalConfig) -> Report:
    """Select, generate (or take the oracle's answers), score; nothing is written here."""
    from actors.eval_session import EvalSession

    with EvalSession(cfg) as session:
        return _evaluate(cfg, session)


def _evaluate(cfg: EvalConfig, session: EvalSession) -> Report:
    from transformers import AutoTokenizer

    start = time.perf_counter()
    sel = select_items(cfg, AutoTokenizer.from_pretrained(cfg.checkpoint))
    log.info(
        "[eval] %d instances (split %s; %d prompts over %d tokens dropped)",
        len(sel.items),
        sel.split,
        sel.dropped_too_long,
        cfg.max_prompt_tokens,
    )
    if cfg.oracle:
        greedy = oracle_texts(sel.items)
        sampled = [[text] * cfg.samples for text in greedy]
    else:
        greedy, sampled = generate_texts(session, sel.items) if sel.items else ([], [])
        session.close_engines()  # their CPUs and GPUs go to the test runners
    name = cfg.model_name or ("oracle" if cfg.oracle else cfg.checkpoint)
    report = Report({})
    greedy_outcomes, sampled_outcomes, roundtrip_failures = [], [], 0
    for item, text, texts in zip(sel.items, greedy, sampled, strict=True):
        context, oracle = item.instance.code_context, item.instance.oracle_new_content
        diffs = oracle_diffs(context, oracle)
        g = score(context, oracle, diffs, text, cfg.max_pair_seconds)
        s = [score(context, oracle, diffs, t, cfg.max_pair_seconds) for t in texts]
        patch = model_patch(item.instance, g.new_content)
        roundtrip_failures += not patch_roundtrips(item.instance, patch, g.new_content)
        greedy_outcomes.append(g)
        sampled_outcomes.append(s)
        report.predictions.append({"instance_id": item.instance_id, "model_name_or_path": name, "model_patch": patch})
        report.answers.append(
            {
                "instance_id": item.instance_id,
                "greedy": _answer(text, g),
                "sampled": [_answer(t, o) for t, o in zip(texts, s, strict=True)],
            }
        )
    new_files = [[o.new_content for o in s] for s in sampled_outcomes]
    tests = resolutions(cfg, sel.items, report.predictions, new_files, session.run_jobs)
    report.summary = {
        "checkpoint": cfg.checkpoint,
        "data": cfg.data,
        "split": sel.split,
        "mode": "oracle" if cfg.oracle else "model",
        "instances": len(sel.items),
        "skipped_other_split": sel.skipped_other_split,
        "dropped_too_long": sel.dropped_too_long,
        "patch_roundtrip_failures": roundtrip_failures,
        "greedy": rates(greedy_outcomes),
        "sampled": sampled_rates(sampled_outcomes)
        | {"samples_per_instance": cfg.samples, "temperature": cfg.temperature},
        **({"tests": tests} if tests else {}),
        "engines": session.engines_used,
        "config": asdict(cfg),
        "seconds": round(time.perf_counter() - start, 2),
    }
    return report


def resolutions(
    cfg: EvalConfig,
    items: list[PromptItem],
    predictions: list[dict[str, str]],
    sampled: list[list[dict[str, str] | None]],
    run_jobs: Callable[[list[TestJob], str], list[TestRun]],
) -> dict[str, Any] | None:
    """resolve_rate of the greedy patches and resolved_any over the samples, by running the
    tests of the instances that carry FAIL_TO_PASS; None when none does (or cfg.tests is off).
    An answer whose edits do not apply does not resolve; identical patches run once."""
    tested = [i for i, it in enumerate(items) if it.instance.fail_to_pass]
    if not cfg.tests or not tested:
        return None
    from reward.execution.runner import TestJob

    patches: dict[tuple[int, str], None] = {}
    for i in tested:
        patches[(i, predictions[i]["model_patch"])] = None
        for new in sampled[i]:
            patches[(i, model_patch(items[i].instance, new))] = None
    jobs = [TestJob(items[i].instance, patch, job_id=str(n)) for n, (i, patch) in enumerate(patches) if patch]
    runs = {run.job_id: run for run in run_jobs(jobs, "answers' test runs")}
    keys = {key: str(n) for n, key in enumerate(patches)}
    ok = lambda i, patch: bool(patch) and bool(getattr(runs.get(keys[(i, patch)]), "resolved", False))  # noqa: E731
    greedy = [ok(i, predictions[i]["model_patch"]) for i in tested]
    any_sample = [any(ok(i, model_patch(items[i].instance, new)) for new in sampled[i]) for i in tested]
    return {
        "instances": len(tested),
        "test_runs": len(jobs),
        "resolve_rate": _mean([float(g) for g in greedy]),
        "resolved_any": _mean([float(a) for a in any_sample]),
        "errors": sorted({f"{r.status}: {r.reason}" for r in runs.values() if r.status != "ok"})[:5],
    }


def _answer(text: str, o: Outcome) -> dict[str, Any]:
    return {"reward": o.reward, "error": o.error, "format_ok": o.format_ok, "exact": o.exact, "text": text}


def write(report: Report, out: str) -> Path:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("predictions.jsonl", report.predictions), ("answers.jsonl", report.answers)):
        with atomic_write(out_dir / name) as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    write_text(out_dir / "summary.json", json.dumps(report.summary, indent=2) + "\n")
    return out_dir


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return 0
    logs.setup()
    try:
        cfg = parse_args(argv)
    except EvalConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cfg.mode == "agentless":
        from actors import agentless

        return agentless.main(cfg)
    report = evaluate(cfg)
    out_dir = write(report, cfg.out)
    keys = ("instances", "split", "mode", "patch_roundtrip_failures", "greedy", "sampled", "tests")
    summary = {k: report.summary[k] for k in keys if k in report.summary}
    print(json.dumps(summary, indent=2))
    log.info("[eval] wrote %s/summary.json, predictions.jsonl, answers.jsonl", out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
