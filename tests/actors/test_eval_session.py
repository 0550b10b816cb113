"""Evaluation's engines (actors/eval/session.py, actors/rollout/engines.py): one seam for both modes.

The request ids, seeds and chunking are checked with a fake engine in this process; the tiny
random model then answers the same requests on a fleet of two rollout actors on a local Ray
(127.0.0.1) and in this process, and the answers must be identical: they depend on each
request's seed, not on how many engines there are or which one drew them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from actors.eval.session import EvalSession, local_cpus
from actors.rollout import engines as engines_mod
from actors.rollout.actor import Completion, GenerationRequest, GenerationResult, request_seed
from conf import eval as eval_config
from conf.config import ConfigError, ModelConfig
from learner.models import resolve

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny() -> str:
    return resolve(ModelConfig(name="tiny"))


class FakeWorker:
    """Answers "<request id>|<seed>|<temperature>" n times; records each call's size."""

    calls: ClassVar[list[int]] = []

    def __init__(self, cfg, run, actor_id, *, seed) -> None:
        self.actor_id = actor_id

    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        FakeWorker.calls.append(len(requests))
        text = lambda r: f"{r.request_id}|{r.seed}|{r.temperature}"  # noqa: E731
        return [
            GenerationResult(r.request_id, [Completion([], [], text(r), "stop")] * r.n, 0, self.actor_id)
            for r in requests
        ]

    def shutdown(self) -> None:
        pass


def test_every_stage_sends_seeded_requests_in_chunks(tiny, monkeypatch):
    monkeypatch.setattr(engines_mod, "RolloutWorker", FakeWorker)
    monkeypatch.setattr("actors.eval.session.PROMPTS_PER_CALL", 2)
    FakeWorker.calls = []
    cfg = eval_config.parse_args([f"model.name={tiny}", "data=demo", "rollout.num_actors=0", "seed=7"])
    with EvalSession(cfg) as session:
        texts = session.generate("repair", [(f"i{k}", [1, 2]) for k in range(5)], 3, 0.5)
        assert session.engines is not None and session.engines.describe()["where"] == "in-process"
    assert FakeWorker.calls == [2, 2, 1]  # PROMPTS_PER_CALL prompts per engine call
    assert texts == [[f"repair/i{k}|{request_seed(7, f'repair/i{k}')}|0.5"] * 3 for k in range(5)]
    assert session.engines is None and session.engines_used["engines"] == 0  # closed, and recorded


def test_a_local_cluster_holds_the_engines_and_the_test_runners(tiny):
    assert (
        local_cpus(
            eval_config.parse_args([f"model.name={tiny}", "rollout.num_actors=2", "reward.execution.num_runners=3"])
        )
        == 4
    )  # 2 x 0.5 + 3 x 1
    assert (
        local_cpus(
            eval_config.parse_args(
                [f"model.name={tiny}", "rollout.num_actors=0", "reward.execution.num_runners=0", "mode=agentless"]
            )
        )
        == 1
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rollout.num_actors=-1"], "rollout.num_actors and rollout.num_gpus must be >= 0"),
        (["rollout.num_actors=0", "rollout.num_gpus=1"], "rollout.num_gpus=1.0: GPUs of each rollout actor"),
        (
            ["rollout.num_actors=2", "rollout.num_gpus=4", "rollout.tensor_parallel_size=8"],
            "at least rollout.tensor_parallel_size=8",
        ),
    ],
)
def test_bad_engine_arguments_are_named(tiny, args, message):
    with pytest.raises(ConfigError, match=message):
        eval_config.parse_args([f"model.name={tiny}", *args])


SCRIPT = """
import json, sys
from conf import eval as eval_config
from actors.eval.session import EvalSession

tiny = sys.argv[1]
prompts = [(f"p{k}", [1 + k, 20, 30 + k, 40]) for k in range(4)]
out = {}
for engines in (0, 2):
    cfg = eval_config.parse_args([f"model.name={tiny}", "data=demo", f"rollout.num_actors={engines}", "rollout.max_new_tokens=8"])
    with EvalSession(cfg) as session:
        actors = []
        if engines:
            session.start_engines().fleet.on_dispatch.append(lambda m: actors.append(m.actor_id))
        out[engines] = {
            "greedy": session.generate("greedy", prompts, 1, 0.0),
            "sampled": session.generate("sampled", prompts, 3, 1.0),
            "actors": sorted(set(actors)),
        }
    out[engines]["used"] = session.engines_used
print("RESULT", json.dumps(out))
"""


@pytest.mark.slow
def test_two_rollout_actors_answer_as_one_engine_in_process(tiny):
    env = dict(os.environ, PYTHONUNBUFFERED="1", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, tiny], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = json.loads(proc.stdout.split("RESULT ", 1)[1])
    here, fleet = out["0"], out["2"]
    assert fleet["actors"] == ["rollout-0", "rollout-1"]  # both engines generated
    assert fleet["used"]["engines"] == 2 and fleet["used"]["where"] == "ray" and here["used"]["where"] == "in-process"
    assert fleet["greedy"] == here["greedy"] and fleet["sampled"] == here["sampled"]
    samples = [text for group in here["sampled"] for text in group]
    assert len(set(samples)) > 1  # real sampling at temperature 1, not one answer repeated
