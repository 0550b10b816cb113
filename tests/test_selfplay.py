"""trainer.selfplay=true (actors/driver/selfplay.py): one step in which the tiny model writes
bugs into demo instances (2 of each group's 16 answers guided: rules bugs written as answers),
the tests prove them in the sandbox, the model repairs the proved ones, and both roles train."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conf import config
from reward.execution import sandbox

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}"),
]


@pytest.fixture(scope="module")
def selfplay_run(tmp_path_factory, train_cli):
    run_dir = tmp_path_factory.mktemp("selfplay") / "run"
    proc = train_cli(run_dir, "trainer.selfplay=true", "trainer.steps=1", "selfplay.guided_bugs=2")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return run_dir


def test_a_selfplay_step_proves_the_policys_bugs_and_trains_both_roles(selfplay_run):
    (m,) = [json.loads(line) for line in (selfplay_run / "metrics.jsonl").read_text().splitlines()]
    assert m["selfplay_bugs_proposed"] == 32 and m["selfplay_bugs_guided"] == 4
    # The tiny model's own 28 answers are random tokens: malformed; the guided ones are proved or not by the tests.
    assert m["selfplay_rejected_malformed"] == 28
    assert m["selfplay_bugs_valid"] >= 1 and m["selfplay_bugs_solved_groups"] == min(m["selfplay_bugs_valid"], 2)
    assert m["prove_s"] > 0 and m["rows_trained"] >= 32  # an injector group and a solver group with signal
    rows = [json.loads(line) for line in (selfplay_run / "rollouts" / "step_000001.jsonl").read_text().splitlines()]
    injector = [r for r in rows if "/inject/" in r["rollout_id"]]
    solver = [r for r in rows if "/solve/" in r["rollout_id"]]
    assert len(injector) == 32 and len(solver) == 16 * m["selfplay_bugs_solved_groups"]
    # Invalid bugs -1; a valid bug that the solver's own samples never fix -alpha (reward/bug_reward.py).
    assert {r["reward"] for r in injector} <= {-1.0, -0.8} and any(r["reward"] == -0.8 for r in injector)
    assert any(r["reward"] == 1.0 for r in solver)  # the oracle's repair, as in any guided step


def test_the_selfplay_step_logs_every_selfplay_metric_and_only_documented_ones(selfplay_run):
    """docs/metrics.md's table against the self-play run, as tests/test_smoke.py holds it against
    the other runs: every selfplay_* key and prove_s is logged (each rejection reason, 0 included)."""
    (m,) = [json.loads(line) for line in (selfplay_run / "metrics.jsonl").read_text().splitlines()]
    table = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    documented = {
        k for row in table.splitlines() if row.startswith("| `") for k in re.findall(r"`([a-z_]+)`", row.split("|")[1])
    }
    assert set(m) - documented == set(), "logged but not in docs/metrics.md's table"
    assert {k for k in documented if k.startswith("selfplay_")} | {"prove_s"} <= set(m)


def test_selfplay_refuses_what_it_does_not_support():
    cfg = config.TrainConfig()
    cfg.trainer.selfplay, cfg.trainer.mode = True, "async"
    with pytest.raises(config.ConfigError, match="trainer.mode=sync"):
        config.validate(cfg)
    cfg.trainer.mode, cfg.selfplay.alpha = "sync", 1.0
    with pytest.raises(config.ConfigError, match="selfplay.alpha"):
        config.validate(cfg)


class _Tokenizer:
    """The chat template's stand-in: the prompt's ids are its characters'."""

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        return [ord(ch) % 256 for m in messages for ch in m["content"]][:64]


class _Fleet:
    def __init__(self) -> None:
        self.submitted = []

    def submit(self, requests):
        self.submitted += requests

    def results(self, ids):
        from actors.rollout.actor import Completion, GenerationResult

        return [GenerationResult(i, [Completion([1], [0.0], "x", "stop")] * 16, 0, "a0") for i in ids]


def test_with_rollout_mode_agent_the_solver_acts_in_episodes_and_the_injector_answers_once():
    from actors.agent.episode import task_messages
    from actors.driver.generation import Rollouts
    from actors.driver.selfplay import SelfPlay
    from data.loader import PromptItem, read_instances

    cfg = config.TrainConfig()
    cfg.trainer.selfplay, cfg.rollout.mode = True, "agent"
    cfg.agent.max_tokens = cfg.rollout.max_model_len
    config.validate(cfg)  # an agent solver is allowed
    (inst,) = list(read_instances("demo", 1))
    play = object.__new__(SelfPlay)  # its pools are not needed to build requests
    play.cfg = cfg
    play.rollouts = object.__new__(Rollouts)
    play.rollouts.cfg, play.rollouts.tokenizer, play.rollouts.fleet = cfg, _Tokenizer(), _Fleet()
    item = play._solver_item(inst)
    assert item.prompt_ids == _Tokenizer().apply_chat_template(task_messages(cfg.agent, inst), True, True)
    play._generate(1, "inject", [PromptItem(inst, [1, 2])])
    play._generate(1, "solve", [item])
    inject, solve = play.rollouts.fleet.submitted
    assert inject.episode is None and "/inject/" in inject.request_id
    assert solve.episode is not None and solve.episode.instance is inst and "/solve/" in solve.request_id
