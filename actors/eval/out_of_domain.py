"""`python -m actors.evaluate mode=ood suite=NAME[,NAME...]`: the paper's Table 3, zero-shot.

    python -m actors.evaluate mode=ood suite=humaneval model.name=DIR [group_size=N rollout.temperature=T]
        [limit=K] [rollout.num_actors=1] [reward.execution.num_runners=2] [out=runs/ood]
    python -m actors.evaluate mode=ood suite=humaneval_plus,mbpp_plus data=DIR model.name=DIR
    python -m actors.evaluate mode=ood suite=humaneval oracle=true          # grader self-check
    python -m actors.evaluate mode=ood suite=humaneval samples_file=samples.jsonl  # grade only

SWE-RL (Wei et al. 2025, Table 3) reports that RL on software-evolution data alone improved
the 70B model on tasks it never trained on: HumanEval+, MBPP+, CRUXEval-I/O, MATH, MMLU. Each
suite here is registered by name (actors/eval/ood/: its loader, prompt and grader); `data=PATH`
is the set's published file, downloaded once (HumanEval's comes with its PyPI package).

Answers: one greedy answer per problem (pass@1 as the paper reports it), generated on the
engines as the other modes generate (actors/eval/session.py: `rollout.num_actors=N` rollout
actors, or 0 for one engine in this process); with `group_size=N` also N sampled ones at
`rollout.temperature`, from
which pass@k is estimated for k <= N (actors/eval/ood/passk.py). `oracle=true` grades each
problem's reference solution instead (HumanEval: all 164 must pass: a check of the loader,
the grader and the sandbox); `samples_file=PATH` grades answers made elsewhere, in evalplus's
samples.jsonl form (`task_id` and `solution`: the whole code, or `completion`: the text after
the prompt; `answer` for the suites that are not code), each row a sample.

Code answers run in the namespace sandbox, `reward.execution.num_runners` at a time (actors/eval/ood/programs.py).

Writes, under `out`: summary.json (per suite: metric, score and its standard error, pass@k,
counts: problems, answered, extracted, passed, timed_out; other gradings (MATH's lenient);
seconds) and predictions.jsonl (every answer with its verdict).
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from actors.eval.ood import SUITES, Problem, Suite, Verdict
from actors.eval.ood.passk import mean_and_stderr, pass_at_ks
from actors.eval.ood.programs import ProgramRunner
from actors.eval.ood.suite import read_jsonl
from conf.errors import UserError, fail
from conf.eval import EvalConfig, needs_model
from conf.io import write_text
from data.prompt import encode_prompt
from learner import models

log = logging.getLogger(__name__)


def suite_names(cfg: EvalConfig) -> list[str]:
    names = [s.strip() for s in cfg.suite.split(",") if s.strip()]
    for name in names:
        SUITES.get(name)  # an unknown name lists the registered ones
    return names


def samples_from_file(path: str, problems: list[Problem]) -> dict[str, list[str]]:
    """A samples.jsonl's rows as answers by task_id: `solution` (whole code, fenced here so that
    the code suites read it as code), `completion` (continues the prompt) or `answer` (as is)."""
    wanted = {p.pid for p in problems}
    answers: dict[str, list[str]] = defaultdict(list)
    for row in read_jsonl(Path(path), ("task_id",)):  # a bad line is a UserError naming it
        if row["task_id"] not in wanted:
            continue
        if "solution" in row:
            answers[row["task_id"]].append(f"```python\n{row['solution']}\n```")
        elif "completion" in row or "answer" in row:
            answers[row["task_id"]].append(str(row.get("completion", row.get("answer"))))
        else:
            raise UserError(f"samples_file={path}: {row['task_id']}: needs one of solution, completion, answer")
    return answers


def _generate(cfg: EvalConfig, name: str, problems: list[Problem], session: Any) -> tuple[list[str], list[list[str]]]:

    tokenizer = models.tokenizer(cfg.model.name, cfg.model.chat_template)
    prompts = [(p.pid, encode_prompt(tokenizer, p.messages)) for p in problems]
    greedy = [texts[0] for texts in session.generate(f"{name}/greedy", prompts, 1, 0.0)]
    sampled = (
        session.generate(f"{name}/sampled", prompts, cfg.group_size, cfg.rollout.temperature) if cfg.group_size else []
    )
    return greedy, sampled


def _counts(verdicts: list[Verdict], answers: list[str]) -> dict[str, int]:
    return {
        "answered": sum(bool(a.strip()) for a in answers),
        "extracted": sum(v.extracted for v in verdicts),
        "passed": sum(v.passed for v in verdicts),
        "timed_out": sum(v.timed_out for v in verdicts),
    }


def run_suite(cfg: EvalConfig, name: str, runner: ProgramRunner, session: Any) -> tuple[dict[str, Any], list[dict]]:
    """(summary of one suite, its predictions rows)."""
    suite: Suite = SUITES.get(name)()
    seconds: dict[str, float] = {}
    begin = time.monotonic()
    problems = suite.load(cfg.data)
    if cfg.limit:
        problems = problems[: cfg.limit]
    seconds["load"] = time.monotonic() - begin
    begin = time.monotonic()
    greedy: list[str] = []
    sampled: list[list[str]] = []
    if cfg.oracle:
        greedy = [suite.reference(p) for p in problems]
    elif cfg.samples_file:
        by_task = samples_from_file(cfg.samples_file, problems)
        sampled = [by_task.get(p.pid, []) for p in problems]
        missing = [p.pid for p, s in zip(problems, sampled, strict=True) if not s]
        if missing:
            raise UserError(
                f"samples_file={cfg.samples_file}: no sample for {len(missing)} problems, e.g. {missing[0]}"
            )
    else:
        greedy, sampled = _generate(cfg, name, problems, session)
    seconds["generate"] = time.monotonic() - begin
    begin = time.monotonic()
    flat = [(p, a, "greedy") for p, a in zip(problems, greedy, strict=False)]
    flat += [(p, a, str(i)) for p, answers in zip(problems, sampled, strict=False) for i, a in enumerate(answers)]
    verdicts = suite.grade([(p, a) for p, a, _ in flat], runner.run)
    seconds["grade"] = time.monotonic() - begin
    rows = [
        {"suite": name, "task_id": p.pid, "sample": which, "answer": a, **_verdict_row(v)}
        for (p, a, which), v in zip(flat, verdicts, strict=True)
    ]
    summary: dict[str, Any] = {"metric": suite.metric, "problems": len(problems)}
    greedy_v = verdicts[: len(greedy)]
    if greedy_v:  # the paper's figure: greedy pass@1 (or accuracy)
        score, stderr = mean_and_stderr([float(v.passed) for v in greedy_v])
        summary |= {"score": round(score, 6), "stderr": round(stderr, 6), **_counts(greedy_v, greedy)}
        for key in sorted({k for v in greedy_v for k in v.also}):
            summary.setdefault("also", {})[key] = round(
                sum(v.also.get(key, False) for v in greedy_v) / len(greedy_v), 6
            )
    if sampled:
        per_problem: dict[str, list[bool]] = defaultdict(list)
        for (p, _, which), v in zip(flat, verdicts, strict=True):
            if which != "greedy":
                per_problem[p.pid].append(v.passed)
        counts = [(len(ok), sum(ok)) for ok in per_problem.values()]
        summary["sampled"] = {"samples": sum(n for n, _ in counts), **pass_at_ks(counts)}
        summary["sampled"] |= _counts(verdicts[len(greedy) :], [a for s in sampled for a in s])
        if not greedy_v:  # graded from a file: the score is pass@1 over its samples
            summary |= {
                "score": summary["sampled"]["pass@1"]["score"],
                "stderr": summary["sampled"]["pass@1"]["stderr"],
            }
    summary["seconds"] = {k: round(v, 3) for k, v in seconds.items()}
    return summary, rows


def _verdict_row(v: Verdict) -> dict[str, Any]:
    row: dict[str, Any] = {"passed": v.passed, "extracted": v.extracted, "timed_out": v.timed_out, "detail": v.detail}
    return row | ({"also": v.also} if v.also else {})


def evaluate(cfg: EvalConfig) -> tuple[dict[str, Any], list[dict]]:
    from actors.eval.session import EvalSession  # imports Ray and vLLM's set-up: not for grading alone

    names = suite_names(cfg)
    started = time.monotonic()
    runner = ProgramRunner(workers=max(1, cfg.reward.execution.num_runners))
    suites: dict[str, Any] = {}
    rows: list[dict] = []
    with EvalSession(cfg) as session:
        for name in names:
            log.info("[ood] suite %s", name)
            suites[name], suite_rows = run_suite(cfg, name, runner, session)
            rows += suite_rows
        session.close_engines()  # records what they were
        engines_used = session.engines_used
    answers = "oracle" if cfg.oracle else ("samples_file" if cfg.samples_file else "generated")
    summary = {
        "mode": "ood",
        "checkpoint": cfg.model.name if needs_model(cfg) else "",
        "answers": answers,
        "samples_per_problem": cfg.group_size,
        "temperature": cfg.rollout.temperature if cfg.group_size else 0.0,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "suites": suites,
        "seconds": round(time.monotonic() - started, 3),
        "engines": engines_used if answers == "generated" else None,
    }
    return summary, rows


def main(cfg: EvalConfig) -> int:
    try:
        summary, rows = evaluate(cfg)
    except UserError as exc:  # an unknown suite, a missing or malformed data or samples file
        fail("python -m actors.evaluate mode=ood", str(exc))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    brief = {
        name: {k: s.get(k) for k in ("metric", "problems", "score", "stderr", "extracted")}
        for name, s in summary["suites"].items()
    }
    print(json.dumps(brief, indent=2))
    log.info("[ood] wrote %s/summary.json, predictions.jsonl", out)
    return 0
