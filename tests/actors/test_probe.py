"""The probe and the run's closing summary (actors/driver/probe.py): no Ray, no engine."""

from __future__ import annotations

import json

from actors.driver.probe import Measurement, Probe, measure, summary_lines
from actors.driver.reward_pool import ScoredJob
from actors.rollout.actor import Completion, GenerationRequest, GenerationResult
from conf import config
from learner import models
from learner.plot import probe_curve
from reward.core import RewardResult

STEPS = [
    {"step": 1, "reward_mean": -0.25, "format_error_rate": 0.5},
    {"step": 2, "reward_mean": 0.0625, "format_error_rate": 0.375},
    {"step": 3, "reward_mean": 0.3, "format_error_rate": 0.125},
]


def test_the_summary_compares_the_probes_and_lists_every_step():
    probes = {
        "start": {"train": Measurement(-1.0, 1.0, 32, 4), "heldout": Measurement(-1.0, 1.0, 16, 2)},
        "sft": {"train": Measurement(-0.4, 0.5, 32, 4), "heldout": Measurement(-0.9, 0.9375, 16, 2)},
        "end": {"train": Measurement(0.125, 0.25, 32, 4), "heldout": Measurement(-0.8, 0.875, 16, 2)},
    }
    assert summary_lines(probes, STEPS) == [
        "[summary] reward -1.000 -> 0.125 (per step: -0.250, 0.062, 0.300) "
        "[the policy's own samples, 4 training prompts x 8, same seeds]",
        "[summary] format errors 100% -> 25% (per step: 50%, 38%, 12%)",
        "[summary] warm start: reward -1.000 -> -0.400, format errors 100% -> 50%; "
        "then GRPO: reward -0.400 -> 0.125, format errors 50% -> 25%",
        "[summary] held-out (2 prompts, never trained on): reward -1.000 -> -0.900 -> -0.800, "
        "format errors 100% -> 94% -> 88%",
    ]


def test_without_a_probe_the_summary_compares_the_first_and_last_step():
    assert summary_lines({}, STEPS) == [
        "[summary] reward -0.250 -> 0.300 (per step: -0.250, 0.062, 0.300) [first and last RL step's samples]",
        "[summary] format errors 50% -> 12% (per step: 50%, 38%, 12%)",
    ]
    assert summary_lines({}, []) == []


def test_a_probe_without_warm_start_or_heldout_gives_two_lines():
    probes = {"start": {"train": Measurement(-1.0, 1.0, 8, 1)}, "end": {"train": Measurement(-0.5, 0.5, 8, 1)}}
    lines = summary_lines(probes, STEPS[:1])
    assert lines == [
        "[summary] reward -1.000 -> -0.500 (per step: -0.250) [the policy's own samples, 1 training prompts x 8, same seeds]",
        "[summary] format errors 100% -> 50% (per step: 50%)",
    ]


def test_measure_counts_only_minus_one_as_malformed():
    assert measure([-1.0, 0.0, 0.5, -1.0]) == (-0.375, 0.5)


class _Fleet:
    """Generation without an engine: records each request, one empty completion per sample."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        self.requests += requests
        return [GenerationResult(r.request_id, [Completion([1], [0.0], "", "stop")] * r.n, 0, "fake") for r in requests]


class _Rewards:
    """Scores every sample of a call with the next value of `values`."""

    def __init__(self, values: list[float]) -> None:
        self.values = iter(values)

    def score_groups(self, groups) -> list[ScoredJob]:
        value = next(self.values)
        return [
            ScoredJob(f"{g.request_id}/{j}", RewardResult(value)) for g in groups for j in range(len(g.completions))
        ]


def test_every_measurement_samples_the_same_prompts_with_the_same_seeds(tmp_path):
    cfg = config.TrainConfig()
    cfg.model.name, cfg.trainer.probe_samples, cfg.trainer.probe_prompts, cfg.data.heldout_fraction = "tiny", 4, 2, 0.2
    tokenizer = models.tokenizer(models.resolve(cfg.model))
    fleet = _Fleet()
    # start: train -1, held-out -1; end: train 0.5, held-out -1
    probe = Probe(cfg, tokenizer, fleet, _Rewards([-1.0, -1.0, 0.5, -1.0]), tmp_path)  # type: ignore[arg-type]
    probe.measure("start")
    results = probe.end(4)
    start, end = fleet.requests[:4], fleet.requests[4:]
    assert [r.seed for r in start] == [r.seed for r in end] and len({r.seed for r in start}) == 4
    assert [r.prompt_ids for r in start] == [r.prompt_ids for r in end]
    assert {r.request_id for r in start}.isdisjoint(r.request_id for r in end)
    heldout = {it.instance_id for it in probe.splits["heldout"]}
    assert heldout and heldout.isdisjoint(it.instance_id for it in probe.splits["train"])
    assert results["end"]["train"] == Measurement(0.5, 0.0, 8, 2) and results["end"]["heldout"].format_error_rate == 1.0
    # A resumed run reads what the first part measured.
    assert Probe(cfg, tokenizer, fleet, _Rewards([]), tmp_path).results == results  # type: ignore[arg-type]


def test_without_probe_prompts_nothing_is_generated_and_the_warm_start_still_runs(tmp_path):
    cfg, fleet, calls = config.TrainConfig(), _Fleet(), []
    cfg.learner.sft_steps = 1
    probe = Probe(cfg, None, fleet, _Rewards([]), tmp_path)  # type: ignore[arg-type]
    probe.before_rl(0, lambda: calls.append("sft"), lambda: calls.append("push"))
    probe.before_rl(3, lambda: calls.append("sft"), lambda: calls.append("push"))  # resumed: no warm start
    assert calls == ["sft", "push", "push"] and probe.end(3) == {} and fleet.requests == []
    assert not (tmp_path / "probe.jsonl").exists()


def test_the_probe_is_off_for_agent_episodes_and_self_play(tmp_path):
    """The probe samples single answers: the default recipe's probe_prompts does not stop
    `rollout.mode=agent` or self-play, nothing is sampled for it there."""
    for mode, selfplay in (("agent", False), ("single", True)):
        cfg, fleet = config.TrainConfig(), _Fleet()
        cfg.trainer.probe_prompts, cfg.rollout.mode, cfg.trainer.selfplay = 3, mode, selfplay
        if mode == "agent":
            config.validate(cfg)  # accepted, not refused
        probe = Probe(cfg, None, fleet, _Rewards([]), tmp_path)  # type: ignore[arg-type]
        assert probe.splits == {}
        probe.before_rl(0, lambda: None, lambda: None)
        assert probe.end(1) == {} and fleet.requests == []


def test_every_k_steps_the_probe_measures_and_the_last_step_is_not_sampled_twice(tmp_path):
    cfg = config.TrainConfig()
    cfg.model.name, cfg.trainer.probe_prompts, cfg.trainer.probe_every = "tiny", 2, 2
    tokenizer = models.tokenizer(models.resolve(cfg.model))
    fleet = _Fleet()
    probe = Probe(cfg, tokenizer, fleet, _Rewards([-1.0, -0.5, 0.25]), tmp_path)  # type: ignore[arg-type]
    probe.measure("start")
    for step in (1, 2, 3, 4):
        probe.after_step(step)
    results = probe.end(4)
    assert list(results) == ["start", "step 2", "step 4", "end"]
    assert results["step 2"]["train"].reward_mean == -0.5 and results["end"] == results["step 4"]
    assert len(fleet.requests) == 3 * 2  # start, step 2, step 4: 2 prompts each; "end" reused step 4's
    assert [r.seed for r in fleet.requests[:2]] == [r.seed for r in fleet.requests[4:]]
    # A resumed run reads them back, "end" included; the curve puts each at its step.
    again = Probe(cfg, tokenizer, fleet, _Rewards([]), tmp_path)  # type: ignore[arg-type]
    assert again.results == results
    rows = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert probe_curve(rows, 4) == [(0, -1.0), (2, -0.5), (4, 0.25)]
    assert summary_lines(results, [])[-1] == (
        "[summary] the probe's training reward along RL: -1.000 (start) -> -0.500 (step 2) -> 0.250 (step 4)"
    )


def test_the_curve_starts_from_the_warm_start_and_ends_at_the_last_step():
    rows = [
        {"label": "start", "train": {"reward_mean": -1.0}},
        {"label": "sft", "train": {"reward_mean": 0.25}},
        {"label": "step 3", "train": {"reward_mean": 0.5}},
        {"label": "end", "train": {"reward_mean": 0.125}},
    ]
    assert probe_curve(rows, 5) == [(0, 0.25), (3, 0.5), (5, 0.125)]
    assert probe_curve([], 5) == []
