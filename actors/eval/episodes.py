"""`python -m actors.evaluate mode=agent`: the policy as an agent, resolved by the tests.

    python -m actors.evaluate mode=agent model.name=DIR data=PATH [reward.execution.repos=[CLONE,...]]
        [limit=N] [max_turns=20] [command_timeout_s=60] [rollout.num_actors=1]
        [reward.execution.num_runners=2]

Per instance of the split that carries FAIL_TO_PASS (validated data; the others are counted and
skipped): one greedy episode (temperature 0) in a sandbox session over the instance's snapshot
in its environment, generated on the engines as training generates its episodes (the rollout
actors' `run_episodes`: actors/agent/rollout.py; `rollout.num_actors=0`: one engine in this process), with
the trainer's agent limits but `max_turns` and `command_timeout_s`, the context the engine's
(`rollout.max_model_len`). The episode's final patch is its SWE-bench prediction, resolved by one fresh
test run of that patch alone on the test-runner pool (`reward.execution.num_runners=0`: a
Runner in this process); an empty patch is not run.

Writes predictions.jsonl (SWE-bench's fields), report.json (reward.execute's, with SWE-bench's
field names), episodes.jsonl (every turn of every episode: replayable with actors.replay) and
summary.json: `instances`, `resolved`, `resolve_rate`, `episodes` (turns and commands per
episode, mean and max; format errors; command timeouts; ended_by counts, `infra` included),
`seconds` (engine_start, generate, tests, total), `engines`, and the split's counts.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from actors.agent.episode import task_messages, time_split
from actors.eval.instances import Selection, split_instances
from actors.eval.session import EvalSession
from actors.rollout.actor import EpisodeTask, GenerationRequest, request_seed
from conf.config import AgentConfig
from conf.eval import EvalConfig
from conf.io import write_text
from conf.progress import Progress
from data.prompt import encode_prompt
from data.schema import Instance
from learner import models
from reward.execution.predictions import report
from reward.execution.runner import TestJob

log = logging.getLogger(__name__)


def instances(cfg: EvalConfig) -> tuple[list[Instance], dict[str, Any]]:
    """The split's validated instances in file order (at most `limit`), and the counts."""
    sel = Selection([], cfg.split if cfg.heldout_fraction > 0 else "all")
    chosen, unvalidated = [], 0
    for instance in split_instances(cfg, sel):
        if not instance.fail_to_pass:
            unvalidated += 1
            continue
        chosen.append(instance)
        if cfg.limit and len(chosen) >= cfg.limit:
            break
    return chosen, {"split": sel.split, "skipped_other_split": sel.skipped_other_split, "unvalidated": unvalidated}


def evaluate(cfg: EvalConfig) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """(summary, predictions, episodes) of the split's validated instances."""

    started = time.monotonic()
    chosen, counts = instances(cfg)
    tokenizer = models.tokenizer(cfg.model.name, cfg.model.chat_template)
    agent = AgentConfig(
        max_turns=cfg.max_turns, command_timeout_s=cfg.command_timeout_s, max_tokens=cfg.rollout.max_model_len
    )
    execution = cfg.reward.execution
    name = cfg.predictions_name or cfg.model.name
    seconds: dict[str, float] = {}
    with EvalSession(cfg) as session:
        begin = time.monotonic()
        engines = session.start_engines()
        seconds["engine_start"] = time.monotonic() - begin
        requests = []
        for inst in chosen:
            rid = f"agent/{inst.instance_id}"
            prompt = encode_prompt(tokenizer, task_messages(agent, inst))
            task = EpisodeTask(inst, agent, execution)
            requests.append(GenerationRequest(rid, prompt, 1, request_seed(cfg.seed, rid), 0.0, episode=task))
        begin = time.monotonic()
        with Progress("eval", "agent episodes", len(requests), emit=log.info) as progress:
            results = engines.generate(requests, progress.update) if requests else []
        seconds["generate"] = time.monotonic() - begin
        session.close_engines()
        episodes = [
            {"instance_id": i.instance_id, **(r.completions[0].episode or {})}
            for i, r in zip(chosen, results, strict=True)
        ]
        predictions = [
            {"instance_id": e["instance_id"], "model_name_or_path": name, "model_patch": e.get("patch", "")}
            for e in episodes
        ]
        jobs = [
            TestJob(i, p["model_patch"], job_id=i.instance_id)
            for i, p in zip(chosen, predictions, strict=True)
            if p["model_patch"].strip()
        ]
        begin = time.monotonic()
        runs = dict(zip([j.instance.instance_id for j in jobs], session.run_jobs(jobs, "agent patches"), strict=True))
        seconds["tests"] = time.monotonic() - begin
        engines_used = session.engines_used
    harness = report(predictions, runs, [])
    seconds["total"] = time.monotonic() - started
    summary = {
        "mode": "agent",
        "instances": len(chosen),
        **counts,
        "resolved": harness["resolved"],
        "resolve_rate": harness["resolved"] / len(chosen) if chosen else 0.0,
        "episodes": _episode_stats(episodes),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "engines": engines_used,
        "harness": harness,
    }
    return summary, predictions, episodes


def _episode_stats(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    turns = [len(e.get("turns", [])) for e in episodes]
    commands = [int(e.get("commands", 0)) for e in episodes]
    ended = Counter("infra" if e.get("infra_error") else e.get("ended_by", "infra") for e in episodes)
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    split = [time_split(e.get("turns", [])) for e in episodes]
    busy = [float(e["engine"]["busy_fraction"]) for e in episodes if "engine" in e]
    return {
        "turns_mean": mean(turns),
        "turns_max": max(turns, default=0),
        "commands_mean": mean(commands),
        "commands_max": max(commands, default=0),
        "format_errors": sum(int(e.get("format_errors", 0)) for e in episodes),
        "command_timeouts": sum(int(e.get("command_timeouts", 0)) for e in episodes),
        "ended_by": dict(sorted(ended.items())),
        # Where an episode's time went (means): waiting for its turns, its commands running.
        "generation_s_mean": round(mean([g for g, _ in split]), 3),
        "command_s_mean": round(mean([c for _, c in split]), 3),
        "engine_busy_fraction": round(mean(busy), 3),
    }


def main(cfg: EvalConfig) -> int:
    summary, predictions, episodes = evaluate(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "report.json", json.dumps(summary.pop("harness"), indent=1) + "\n")
    write_text(out / "predictions.jsonl", "".join(json.dumps(p) + "\n" for p in predictions))
    write_text(out / "episodes.jsonl", "".join(json.dumps(e) + "\n" for e in episodes))
    write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    print(
        json.dumps({k: summary[k] for k in ("instances", "resolved", "resolve_rate", "episodes", "seconds")}, indent=2)
    )
    log.info("[agent] wrote %s/summary.json, report.json, predictions.jsonl, episodes.jsonl", out)
    return 0
