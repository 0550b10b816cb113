"""The run's closing summary (actors/driver/probe.py summary_lines): pure formatting, no Ray."""

from __future__ import annotations

from actors.driver.probe import Measurement, measure, summary_lines

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
