"""Agent mode's samples (actors/driver/generation.py): what the loss sees of an episode, and
how a group's statistics leave out the episodes the infrastructure failed."""

from __future__ import annotations

import torch
from transformers import AutoTokenizer

from actors.agent.episode import task_messages
from actors.driver.generation import Group, Rollouts, group_advantages, train_samples, valid_samples
from actors.rollout.actor import Completion
from conf.config import LearnerConfig, TrainConfig
from data.loader import InstanceLoader, PromptItem, read_instances
from data.prompt import encode_prompt
from learner.models import build_tiny_tokenizer
from learner.objectives.advantages import ADVANTAGES


def _episode(ended_by: str, n: int = 4) -> Completion:
    return Completion(list(range(n)), [-0.5] * n, "patch", ended_by, [1.0, 1.0, 0.0, 1.0][:n], {"turns": []})


def _group(completions: list[Completion]) -> Group:
    instance = next(i for i in read_instances("demo", 0))
    return Group("0/0/x", PromptItem(instance, [9, 9, 9]), completions, 0, "rollout-0")  # the episodes' prompt


def test_the_loss_sees_sampled_tokens_and_no_cut_or_failed_episode():
    group = _group([_episode("submit"), _episode("max_turns"), _episode("infra"), _episode("format_errors")])
    samples = train_samples([group], [1.0, 1.0, 0.0, -1.0])
    assert [s.prompt_ids for s in samples] == [[9, 9, 9]] * 4  # the episodes' own prompt
    assert [s.loss_mask for s in samples] == [[1, 1, 0, 1], [0] * 4, [0] * 4, [1, 1, 0, 1]]
    kept = train_samples([group], [1.0, 1.0, 0.0, -1.0], keep_cut=True)
    assert kept[1].loss_mask == [1, 1, 0, 1] and kept[2].loss_mask == [0] * 4  # infra never


def test_an_episode_a_session_limit_ended_is_the_policys_trained_and_counted():
    from actors.driver.agent_metrics import agent_metrics

    group = _group([_episode("submit"), _episode("limit_depth"), _episode("limit_answer"), _episode("infra")])
    assert [s.loss_mask for s in train_samples([group], [1.0, -1.0, -1.0, 0.0])][1:3] == [[1, 1, 0, 1]] * 2
    assert valid_samples([group]).tolist() == [True, True, True, False]  # in its group's baseline
    metrics = agent_metrics([group])
    assert (metrics["agent_ended_limit"], metrics["agent_ended_infra"], metrics["agent_ended_submit"]) == (2, 1, 1)


def test_a_failed_episode_is_left_out_of_its_groups_statistics():
    groups = [
        _group([_episode("submit"), _episode("infra"), _episode("submit")]),
        _group([_episode("infra")] * 2 + [_episode("submit")]),
    ]
    valid = valid_samples(groups)
    assert valid.tolist() == [True, False, True, False, False, True]
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    grpo = ADVANTAGES.get("grpo")
    adv = group_advantages(rewards, valid, 3, grpo, TrainConfig())
    expected = grpo(torch.tensor([1.0, 0.0], dtype=torch.float64), 2, LearnerConfig())
    assert adv[:3].tolist() == [expected[0].item(), 0.0, expected[1].item()]  # its 0 is not a baseline
    assert adv[3:].tolist() == [0.0, 0.0, 0.0]  # one valid sample: no baseline at all


class _Fleet:
    """Records what the driver queues (the fleet's submit)."""

    def __init__(self) -> None:
        self.submitted: list = []

    def submit(self, requests: list) -> None:
        self.submitted += requests


def test_a_resumed_run_queues_the_same_episodes_for_the_same_step(tmp_path):
    """What resume rests on in agent mode: from the checkpoint's loader cursor, the step's
    requests (ids, seeds, prompts, instances) are the ones the killed run queued, so its
    episodes are regenerated as they were, none lost and none added."""
    build_tiny_tokenizer(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    cfg = TrainConfig()
    cfg.rollout.mode, cfg.trainer.prompts_per_step = "agent", 2

    def queued(state: dict | None, steps: range) -> tuple[list, dict]:
        loader = InstanceLoader.from_config(cfg.data, tokenizer, seed=cfg.seed, messages=Rollouts.messages(cfg))
        if state is not None:
            loader.load_state_dict(state)
        fleet = _Fleet()
        rollouts = Rollouts(cfg, loader, fleet, tokenizer)  # type: ignore[arg-type]
        for s in steps:
            rollouts.prefetch(s)
        return fleet.submitted, rollouts.loader_state(steps[-1])

    first_run, cursor = queued(None, range(2))  # steps 0 and 1 queued; the run is killed in step 1
    resumed, _ = queued(cursor, range(1, 2))  # the resumed run starts at step 1 from that cursor
    key = lambda r: (r.prompt_ids, r.n, r.seed, r.episode.instance.instance_id)  # noqa: E731
    assert [key(r) for r in first_run[2:]] == [key(r) for r in resumed]
    assert all(r.episode is not None and r.n == cfg.group_size for r in resumed)
    # The episode's prompt is the agent's system prompt and the issue, not the paper's files.
    (request, *_) = resumed
    messages = task_messages(cfg.agent, request.episode.instance)
    assert request.prompt_ids == encode_prompt(tokenizer, messages)
