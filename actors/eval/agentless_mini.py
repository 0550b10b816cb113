"""The paper's evaluation: Agentless Mini on whole repositories, resolved by the tests.

    python -m actors.evaluate mode=agentless model.name=DIR data=PATH [reward.execution.repos=[CLONE,...]]
        [localize_top=3] [group_size=16] [repro_tests=4] [oracle_localize=true] [oracle_repair=true]

Per instance that carries FAIL_TO_PASS (validated data; the others are counted and skipped):

    localize    the model reads the issue and the repository's tree (data/agentless/repo_view.py: the
                base commit's sources in the language of the instance's test runner, Python or
                JavaScript/TypeScript, from the demo snapshot or a local clone) and names
                the files to change; the first `localize_top` that exist are kept, the others
                counted (data/context/file_picks.py). One greedy answer.
    repair      `group_size` answers in the training prompt (data/prompt.py, files shuffled) with
                the localized files whole, as many as fit `max_prompt_tokens`, in rank order;
                edits applied (reward/apply.py), patches normalized and de-duplicated, votes
                counted (reward/rerank.py)
    reproduce   `repro_tests` sampled test files (data/agentless/prompts.py: pytest's at the
                root, or one for the instance's JavaScript runner beside its tests,
                agentless_sandbox.case_repro_target); one is kept when it runs and fails on the
                original code in the sandbox
    regression  each candidate with the instance's test patch: the candidate survives when
                every PASS_TO_PASS test passes (only those outcomes are read); an instance
                without PASS_TO_PASS falls back on the repository's own test files that import
                the edited modules (data/agentless/regression_tests.py), run on the original code and on
                each candidate: a candidate that fails a test the original passes is dropped
    repro       each kept reproduction test on each surviving candidate
    rerank      majority vote among the candidates that pass every kept reproduction test (else
                among the regression survivors, else among all), ties broken by reproduction
                tests passed; the winner goes into predictions.jsonl

The sandbox stages and the rerank live in actors/eval/agentless_sandbox.py. The final patches'
resolution is the executor's (reward/execute.py's report over runner
results): the regression run of a candidate is exactly the executor's job for it (the candidate
and the test patch, every FAIL_TO_PASS and PASS_TO_PASS test), so it is run once and read twice.
`best_candidate_resolve_rate` is the ceiling a perfect reranker would reach (any candidate
resolves). Generation runs on the rollout fleet (`rollout.num_actors=N` rollout actors on Ray,
started as the trainer starts them; 0: one engine in this process) and test runs on the
test-runner pool, both on one Ray session (actors/eval/session.py), so the work scales with
the cluster.

summary.json: `localization` (recall_at_n of the oracle's changed files that exist at the base
commit, all_found_rate, unknown_paths and the instances naming them, dropped_too_long),
`reproduction` (written, kept, instances_with_kept_test), `candidates` (generated, applied,
unique, survive_regression, survive_repro: on instances with a kept test), `resolve_rate`,
`best_candidate_resolve_rate`, `regression_fallback` (instances_without_pass_to_pass, instances
that used the fallback, baseline_failed: those whose original run failed, so nothing was dropped,
test_files run, candidates dropped), `report` (the executor's counts; report.json has its ids),
`engines` (how many generated, where, restarts) and `seconds` per stage (engine_start,
localize, repair, reproduce, repro_check, regression, regression_fallback, repro_on_candidates,
total). `reward.execution.num_runners=0` runs the tests in this process; with
`rollout.num_actors=0` too, nothing needs Ray.

Departures from the paper (Agentless Mini): one localization step (no related-element step),
greedy; the regression fallback's test selection is an import graph (data/agentless/regression_tests.py),
not Agentless's model-chosen test subset; the repair's context is whole files, not windows
(with `oracle_repair=true`, every localized file: no prompt is sent, so none is cut).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from actors.eval.agentless_sandbox import Case, RunJobs, case_repro_target, fallback_figures, rerank, run_tests
from actors.eval.instances import Selection, split_instances
from actors.eval.session import EvalSession
from actors.observe.phases import PhaseTimer
from conf.eval import EvalConfig
from conf.io import write_text
from data.agentless.prompts import answer_part, localize_messages, read_test_file, repro_messages, repro_test_patch
from data.agentless.repo_view import RepoUnavailable, changed_paths, open_view
from data.context.file_picks import read_picks
from data.patching import files_patch
from data.prompt import build_messages, encode_prompt
from data.schema import Instance
from learner import models
from reward import OracleAnswerError, oracle_answer
from reward.apply import apply_edits
from reward.execution.environments import EnvSpec
from reward.execution.predictions import report
from reward.execution.runner import HOST_DEMO_SPEC
from reward.execution.runners import runner_for
from reward.execution.snapshots import clone_map
from reward.parse import Rejected, parse_output
from reward.rerank import deduplicate, patch_key

log = logging.getLogger(__name__)


class Generator:
    """Chat prompts -> completions on the evaluation's engines (actors/eval/session.py: the
    rollout fleet, or one worker in this process), started on first use (the oracle switches
    with repro_tests=0 need no engine)."""

    def __init__(self, cfg: EvalConfig, tokenizer: Any, session: EvalSession | None = None) -> None:
        self.cfg, self.tokenizer, self.session = cfg, tokenizer, session

    def encode(self, messages: list[dict[str, str]]) -> list[int] | None:
        ids = encode_prompt(self.tokenizer, messages)
        return ids if len(ids) <= self.cfg.max_prompt_tokens else None

    def __call__(self, stage: str, prompts: list[tuple[str, list[int]]], n: int, temperature: float) -> list[list[str]]:
        assert self.session is not None
        return self.session.generate(stage, prompts, n, temperature)

    def start(self) -> None:
        if self.session is not None:
            self.session.start_engines()

    def close(self) -> None:
        if self.session is not None:
            self.session.close_engines()


# -- the model's stages -----------------------------------------------------------------------------


def localize(cfg: EvalConfig, cases: list[Case], gen: Generator) -> dict[str, Any]:
    """Fill case.localized: the oracle's files, or the model's top N that exist."""
    too_long = 0
    if cfg.oracle_localize:
        for case in cases:
            case.localized = list(case.oracle_files)
    else:
        prompts = []
        for case in cases:
            ids = gen.encode(localize_messages(case.instance.problem_statement, case.view.files, cfg.localize_top))
            if ids is None:
                too_long += 1
            else:
                prompts.append((case.iid, ids))
        answers = dict(zip([k for k, _ in prompts], gen("localize", prompts, 1, 0.0), strict=True))
        for case in cases:
            if case.iid in answers:
                picks = read_picks(answer_part(answers[case.iid][0]), case.view.files, cfg.localize_top)
                case.localized, case.unknown = picks.paths, picks.unknown
    recalls = [len(set(c.localized) & set(c.oracle_files)) / len(c.oracle_files) for c in cases if c.oracle_files]
    return {
        "top_n": cfg.localize_top,
        "recall_at_n": _mean(recalls),
        "all_found_rate": _mean([float(r == 1.0) for r in recalls]),
        "files_named_mean": _mean([float(len(c.localized)) for c in cases]),
        "unknown_paths": sum(len(c.unknown) for c in cases),
        "instances_naming_unknown_paths": sum(bool(c.unknown) for c in cases),
        "tree_files_mean": _mean([float(len(c.view.files)) for c in cases]),
        "dropped_too_long": too_long,
    }


def repair_context(gen: Generator, case: Case, seed: int) -> tuple[dict[str, str], list[int] | None]:
    """The localized files, whole, in rank order while the training prompt fits; its ids (None
    when even the prompt without files does not fit). With no file the model is still asked:
    its only possible edits create files, and its samples count as generated."""
    context: dict[str, str] = {}
    ids = gen.encode(build_messages(replace(case.instance, code_context={}), seed))
    for path in case.localized:
        content = case.view.read(path)
        if content is None:
            continue
        trial = {**context, path: content}
        trial_ids = gen.encode(build_messages(replace(case.instance, code_context=trial), seed))
        if trial_ids is None:
            break
        context, ids = trial, trial_ids
    return context, ids


def repair(cfg: EvalConfig, cases: list[Case], gen: Generator) -> None:
    """Fill case.candidates: S answers (or the oracle's), applied, normalized, de-duplicated."""
    texts: dict[str, list[str]] = {}
    prompts = []
    for case in cases:
        if cfg.oracle_repair:  # no prompt is sent, so no prompt budget: every localized file
            case.context = {p: c for p in case.localized if (c := case.view.read(p)) is not None}
            texts[case.iid] = [_oracle_text(case.instance)] * cfg.group_size
            continue
        case.context, ids = repair_context(gen, case, cfg.seed)
        if ids is not None:
            prompts.append((case.iid, ids))
    if prompts:
        answers = gen("repair", prompts, cfg.group_size, cfg.rollout.temperature)
        texts |= dict(zip([k for k, _ in prompts], answers, strict=True))
    for case in cases:
        samples = texts.get(case.iid, [])
        case.generated = len(samples)
        applied = [(patch_key(new), files_patch(case.context, new, set())) for t in samples if (new := _apply(case, t))]
        case.applied = len(applied)
        case.candidates = deduplicate(applied)


def _oracle_text(instance: Instance) -> str:
    try:
        return oracle_answer(instance.code_context, instance.oracle_new_content)
    except OracleAnswerError as exc:
        log.warning("[agentless] %s: no oracle answer (%s)", instance.instance_id, exc)
        return ""


def _apply(case: Case, text: str) -> dict[str, str] | None:
    """The files an answer changes (new content; "" = deleted), None when it does not apply."""
    try:
        applied = apply_edits(case.context, parse_output(text))
    except Rejected:
        return None
    changed = {p: c for p, c in applied.new_content.items() if c != case.context.get(p, "")}
    return changed if changed and not applied.oversized else None


def write_repro_tests(cfg: EvalConfig, cases: list[Case], gen: Generator) -> list[tuple[Case, str]]:
    """R sampled reproduction tests per instance, as test patches (those with a test file)."""
    if cfg.repro_tests == 0:
        return []
    prompts = []
    for case in cases:
        target = case_repro_target(case)
        files = {p: c for p in case.localized if (c := case.view.read(p)) is not None}
        ids = gen.encode(repro_messages(case.instance.problem_statement, files, target))
        if ids is not None:
            prompts.append((case, target, ids))
    answers = gen("reproduce", [(c.iid, ids) for c, _, ids in prompts], cfg.repro_tests, cfg.rollout.temperature)
    written = []
    for (case, target, _), texts in zip(prompts, answers, strict=True):
        tests = [t for text in texts if (t := read_test_file(text, target)) is not None]
        case.repro_written = len(tests)
        written += [(case, repro_test_patch(t, target.path)) for t in tests]
    return written


# -- the command ------------------------------------------------------------------------------------


def open_cases(cfg: EvalConfig) -> tuple[list[Case], dict[str, Any]]:
    """The split's validated instances (FAIL_TO_PASS) with a readable repository."""
    sel = Selection([], cfg.split if cfg.heldout_fraction > 0 else "all")
    clones = clone_map(cfg.reward.execution.repos)
    cases: list[Case] = []
    counts = {"unvalidated": 0, "no_repository": 0}
    for instance in split_instances(cfg, sel):
        if not instance.fail_to_pass:
            counts["unvalidated"] += 1
            continue
        spec = EnvSpec.from_json(instance.environment) or HOST_DEMO_SPEC
        try:
            view = open_view(instance, spec.snapshot, clones, runner_for(spec.runner).language)
        except RepoUnavailable as exc:
            log.warning("[agentless] %s: skipped (%s)", instance.instance_id, exc)
            counts["no_repository"] += 1
            continue
        cases.append(Case(instance, view, changed_paths(instance, view.files)))
        if cfg.limit and len(cases) >= cfg.limit:
            break
    return cases, {"split": sel.split, "skipped_other_split": sel.skipped_other_split, **counts}


def evaluate(
    cfg: EvalConfig, run_jobs: RunJobs | None = None, gen: Generator | None = None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Every stage on the split's validated instances: (summary, predictions). `run_jobs` and
    `gen` replace the test-runner pool and the engines (tests: a local Runner, scripted answers)."""
    with EvalSession(cfg) as session:
        return _evaluate(cfg, session, run_jobs or session.run_jobs, gen)


def _evaluate(
    cfg: EvalConfig, session: EvalSession, run_jobs: RunJobs, gen: Generator | None
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    # transformers pins torch's compile cache when imported (learner/models.py)

    timer = PhaseTimer()  # made first: its total is the whole evaluation's
    cases, selection = open_cases(cfg)
    log.info("[agentless] %d validated instances (%s)", len(cases), selection)
    gen = gen or Generator(cfg, models.tokenizer(cfg.model.name, cfg.model.chat_template), session)
    try:
        with timer("engine_start"):
            if cases and not (cfg.oracle_localize and cfg.oracle_repair and cfg.repro_tests == 0):
                gen.start()  # timed on its own: the stages' seconds are their own work
        with timer("localize"):
            localization = localize(cfg, cases, gen)
        with timer("repair"):
            repair(cfg, cases, gen)
        with timer("reproduce"):
            written = write_repro_tests(cfg, cases, gen)
    finally:
        gen.close()  # the engines' CPUs and GPUs go to the test runners; Ray stays up for them
    run_tests(cases, written, run_jobs, timer)
    filters = [rerank(case) for case in cases]
    name = cfg.predictions_name or cfg.model.name
    predictions = [{"instance_id": c.iid, "model_name_or_path": name, "model_patch": _final_patch(c)} for c in cases]
    final_runs = {c.iid: c.runs[c.winner] for c in cases if c.winner is not None and c.runs[c.winner] is not None}
    harness = report(predictions, final_runs, [])
    resolved_any = [any(bool(r and r.resolved) for r in c.runs) for c in cases]
    # summary.json names a stage's seconds by the stage alone, as it always has.
    seconds = {k.removesuffix("_s"): v for k, v in timer.seconds.items()} | {"total": timer.total()}
    summary = {
        "checkpoint": cfg.model.name,
        "data": cfg.data,
        "mode": "agentless",
        "oracle_localize": cfg.oracle_localize,
        "oracle_repair": cfg.oracle_repair,
        "instances": len(cases),
        **selection,
        "localization": localization,
        "reproduction": {
            "written": sum(c.repro_written for c in cases),
            "kept": sum(len(c.repro_kept) for c in cases),
            "instances_with_kept_test": sum(bool(c.repro_kept) for c in cases),
            "per_instance": cfg.repro_tests,
        },
        "candidates": {
            "generated": sum(c.generated for c in cases),
            "applied": sum(c.applied for c in cases),
            "unique": sum(len(c.candidates) for c in cases),
            "survive_regression": sum(f["survive_regression"] for f in filters),
            "survive_repro": sum(f["survive_repro"] for f in filters),
            "instances_without_files": sum(not c.context for c in cases),
        },
        "regression_fallback": fallback_figures(cases),
        "resolved": harness["resolved"],
        "resolve_rate": harness["resolved"] / len(cases) if cases else 0.0,
        "best_candidate_resolve_rate": _mean([float(r) for r in resolved_any]),
        "report": {k: harness[k] for k in ("submitted", "completed", "unresolved", "error", "empty_patch")},
        "engines": session.engines_used,
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "config": asdict(cfg),
    }
    return summary | {"harness": harness}, predictions


def _final_patch(case: Case) -> str:
    return "" if case.winner is None else case.candidates[case.winner].patch


def main(cfg: EvalConfig) -> int:
    """Run the pipeline; write summary.json, report.json (SWE-bench's fields) and predictions.jsonl."""
    summary, predictions = evaluate(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "report.json", json.dumps(summary.pop("harness"), indent=1) + "\n")
    write_text(out / "predictions.jsonl", "".join(json.dumps(p) + "\n" for p in predictions))
    write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    keys = ("instances", "localization", "reproduction", "candidates", "resolve_rate", "best_candidate_resolve_rate")
    print(json.dumps({k: summary[k] for k in keys} | {"seconds": summary["seconds"]}, indent=2))
    log.info("[agentless] wrote %s/summary.json, report.json, predictions.jsonl", out)
    return 0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
