"""The quick proxy the paper also reports (`mode=oracle_context`, the default of
`python -m actors.evaluate`): greedy and sampled answers to held-out issues, the model handed
the files the oracle patch changes, scored by the SWE-RL reward. Being given those files is
most of what SWE-bench tests, so these figures are not a SWE-bench score (mode=agentless is).

The instances are those the trainer holds out with the same `heldout_fraction` (the hash rule
of data.loader.is_heldout; `split=train` gives the others), or all of them when the fraction
is 0 (actors/eval/instances.py); prompts are built as in training (data.prompt) and those over
`max_prompt_tokens` are dropped and counted. One greedy answer and `group_size` sampled ones per
instance, generated on the session's engines (actors/eval/session.py).

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
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from actors.eval.instances import select_items
from actors.eval.session import EvalSession
from conf.eval import EvalConfig
from conf.io import atomic_write, write_text
from data.loader import PromptItem
from data.patching import PatchError, apply_patch, created_files, files_patch
from data.schema import Instance
from learner import models
from reward import OracleAnswerError, oracle_answer, oracle_diffs, score_with_oracle_diffs
from reward.apply import apply_edits
from reward.core import changed_files
from reward.execution.runner import TestJob, TestRun
from reward.kinds.outcomes import screened
from reward.parse import parse_output
from reward.screen import screen_answer

log = logging.getLogger(__name__)


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
    return greedy, session.generate("sampled", prompts, session.cfg.group_size, session.cfg.rollout.temperature)


# -- scoring and patches ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    reward: float
    error: str | None
    format_ok: bool
    exact: bool
    new_content: dict[str, str] | None  # the files the answer changes; None when it does not apply


def score(
    context: dict[str, str],
    oracle: dict[str, str],
    oracle_diff: dict[str, str | None],
    text: str,
    max_pair_seconds: float,
) -> Scored:
    """The SWE-RL reward of one answer, plus whether its edits rebuild exactly the oracle's files.
    An answer the static screen refuses scores -1 as in training, with no patch (reward/screen.py)."""
    if findings := screen_answer(text):
        refused = screened(findings)
        return Scored(refused.reward, refused.error, True, False, None)
    result = score_with_oracle_diffs(context, oracle_diff, text, max_pair_seconds=max_pair_seconds)
    if result.reward == -1.0:
        return Scored(result.reward, result.error, result.format_ok, False, None)
    applied = apply_edits(context, parse_output(text))  # cannot raise: the reward applied the same edits
    if applied.oversized:
        return Scored(result.reward, result.error, True, False, None)
    new = changed_files(context, applied.new_content)
    return Scored(result.reward, result.error, True, new == changed_files(context, oracle), new)


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


def rates(outcomes: list[Scored]) -> dict[str, float]:
    return {
        "answers": len(outcomes),
        "format_rate": _mean([float(o.format_ok) for o in outcomes]),
        "apply_rate": _mean([float(o.reward != -1.0) for o in outcomes]),
        "mean_reward": _mean([o.reward for o in outcomes]),
        "exact_match_rate": _mean([float(o.exact) for o in outcomes]),
    }


def sampled_rates(groups: list[list[Scored]]) -> dict[str, float]:
    return rates([o for g in groups for o in g]) | {
        "any_exact_rate": _mean([float(any(o.exact for o in g)) for g in groups]),
        "mean_best_reward": _mean([max(o.reward for o in g) for g in groups if g]),
    }


@dataclass
class EvalReport:
    summary: dict[str, Any]
    predictions: list[dict[str, str]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)


def evaluate(cfg: EvalConfig) -> EvalReport:
    """Select, generate (or take the oracle's answers), score; nothing is written here."""

    with EvalSession(cfg) as session:
        return _evaluate(cfg, session)


def _evaluate(cfg: EvalConfig, session: EvalSession) -> EvalReport:

    start = time.perf_counter()
    sel = select_items(cfg, models.tokenizer(cfg.model.name, cfg.model.chat_template))
    log.info(
        "[eval] %d instances (split %s; %d prompts over %d tokens dropped)",
        len(sel.items),
        sel.split,
        sel.dropped_too_long,
        cfg.max_prompt_tokens,
    )
    if cfg.oracle:
        greedy = oracle_texts(sel.items)
        sampled = [[text] * cfg.group_size for text in greedy]
    else:
        greedy, sampled = generate_texts(session, sel.items) if sel.items else ([], [])
        session.close_engines()  # their CPUs and GPUs go to the test runners
    name = cfg.predictions_name or ("oracle" if cfg.oracle else cfg.model.name)
    report = EvalReport({})
    greedy_outcomes, sampled_outcomes, roundtrip_failures = [], [], 0
    for item, text, texts in zip(sel.items, greedy, sampled, strict=True):
        context, oracle = item.instance.code_context, item.instance.oracle_new_content
        diffs = oracle_diffs(context, oracle)
        g = score(context, oracle, diffs, text, cfg.reward.max_pair_seconds)
        s = [score(context, oracle, diffs, t, cfg.reward.max_pair_seconds) for t in texts]
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
        "checkpoint": cfg.model.name,
        "data": cfg.data,
        "split": sel.split,
        "mode": "oracle" if cfg.oracle else "model",
        "instances": len(sel.items),
        "skipped_other_split": sel.skipped_other_split,
        "dropped_too_long": sel.dropped_too_long,
        "patch_roundtrip_failures": roundtrip_failures,
        "greedy": rates(greedy_outcomes),
        "sampled": sampled_rates(sampled_outcomes)
        | {"samples_per_instance": cfg.group_size, "temperature": cfg.rollout.temperature},
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


def _answer(text: str, o: Scored) -> dict[str, Any]:
    return {"reward": o.reward, "error": o.error, "format_ok": o.format_ok, "exact": o.exact, "text": text}


def write(report: EvalReport, out: str) -> Path:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("predictions.jsonl", report.predictions), ("answers.jsonl", report.answers)):
        with atomic_write(out_dir / name) as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    write_text(out_dir / "summary.json", json.dumps(report.summary, indent=2) + "\n")
    return out_dir
