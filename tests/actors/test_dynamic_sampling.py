"""DAPO's dynamic sampling with fake rollouts and a fake reward pool: which groups a step keeps,
how many extra rounds it runs, and what it counts."""

import dataclasses

from actors.driver.dynamic_sampling import GroupSampler, assemble, has_signal, pair
from actors.driver.generation import Group
from actors.driver.reward_pool import ScoredJob
from actors.observe.phases import PhaseTimer
from actors.rollout.actor import Completion
from conf.config import TrainConfig
from reward.core import RewardResult

G = 2  # group size


def _group(name: str) -> Group:
    # The group's name says its rewards: "flat..." all -1, anything else -1 and 1.
    completions = [Completion([1], [-0.5], name, "stop") for _ in range(G)]
    return Group(name, None, completions, policy_version=0, actor_id="a")  # type: ignore[arg-type]


def _scores(groups):
    return [
        ScoredJob(f"{g.request_id}/{j}", RewardResult(-1.0 if g.request_id.startswith("flat") or j == 0 else 1.0))
        for g in groups
        for j in range(G)
    ]


class FakeRollouts:
    def __init__(self, first, extras):
        self.first, self.extras, self.asked = first, list(extras), []

    def collect(self, step, policy_version):
        return [_group(n) for n in self.first], 1  # one stale group dropped

    def extra(self, step, policy_version, count):
        self.asked.append(count)
        names, self.extras = self.extras[:count], self.extras[count:]
        return [_group(n) for n in names]


class FakeRewards:
    def score_groups(self, groups):
        return _scores(groups)


def _sampler(first, extras, *, on=True, max_rounds=3):
    cfg = TrainConfig()
    cfg.trainer = dataclasses.replace(
        cfg.trainer, prompts_per_step=len(first), dynamic_sampling=on, dynamic_sampling_max_rounds=max_rounds
    )
    rollouts = FakeRollouts(first, extras)
    return GroupSampler(cfg, rollouts, FakeRewards()), rollouts  # type: ignore[arg-type]


def test_signal_and_assembly():
    r0 = pair([_group("a"), _group("flat1")], _scores([_group("a"), _group("flat1")]))
    r1 = pair([_group("flat2"), _group("b")], _scores([_group("flat2"), _group("b")]))
    assert has_signal(r0) == [True, False]
    batch, dropped = assemble([r0, r1], 2)
    assert [g.request_id for g, _ in batch] == ["a", "b"]
    assert dropped == 2
    # Too few with signal: completed with the first flat group, the other counted as dropped.
    batch, dropped = assemble([r0], 2)
    assert [g.request_id for g, _ in batch] == ["a", "flat1"]  # in generation order
    assert dropped == 0


def test_flat_groups_are_replaced_by_extra_rounds():
    sampler, rollouts = _sampler(["a", "flat1", "flat2"], ["flat3", "b", "c"])
    timer = PhaseTimer()
    groups, scored, counts = sampler.sample(0, 0, timer)
    # Round 1 asks for the 2 missing and gets flat3 and b; round 2 asks for 1 and gets c.
    assert rollouts.asked == [2, 1]
    assert [g.request_id for g in groups] == ["a", "b", "c"]
    assert [s.rollout_id for s in scored] == [f"{n}/{j}" for n in ("a", "b", "c") for j in range(G)]
    assert counts == {"stale_dropped": 1, "dynamic_sampling_rounds": 2, "dynamic_sampling_dropped": 3}
    assert {"generate_s", "reward_s"} <= timer.seconds.keys()


def test_rounds_are_capped_and_the_batch_keeps_its_size():
    sampler, rollouts = _sampler(["flat1", "a"], ["flat2", "flat3", "flat4"], max_rounds=2)
    groups, _, counts = sampler.sample(0, 0, PhaseTimer())
    assert rollouts.asked == [1, 1]
    assert [g.request_id for g in groups] == ["flat1", "a"]
    assert counts["dynamic_sampling_rounds"] == 2
    assert counts["dynamic_sampling_dropped"] == 2  # flat2 and flat3; flat1 fills the batch


def test_off_keeps_the_step_as_generated():
    sampler, rollouts = _sampler(["flat1", "a"], ["b"], on=False)
    groups, _, counts = sampler.sample(0, 0, PhaseTimer())
    assert rollouts.asked == []
    assert [g.request_id for g in groups] == ["flat1", "a"]
    assert counts == {"stale_dropped": 1, "dynamic_sampling_rounds": 0, "dynamic_sampling_dropped": 0}


def test_extra_prompts_get_fresh_slots_after_the_steps_own():
    from actors.driver.generation import Rollouts
    from actors.rollout.actor import GenerationResult
    from data.loader import PromptItem

    class Item(PromptItem):
        @property
        def instance_id(self):
            return self.instance

    class Loader:
        def __init__(self):
            self.served = 0

        def next_batch(self, n):
            self.served += n
            return [Item(f"i{self.served - n + k}", [7]) for k in range(n)]  # type: ignore[arg-type]

    class Fleet:
        def __init__(self):
            self.requests = []

        def submit(self, requests):
            self.requests += requests

        def results(self, ids):
            return [GenerationResult(i, [Completion([1], [-0.1], "x", "stop")] * G, 5, "a") for i in ids]

    cfg = TrainConfig(group_size=G)
    cfg.trainer = dataclasses.replace(cfg.trainer, prompts_per_step=2)
    fleet = Fleet()
    rollouts = Rollouts(cfg, Loader(), fleet, tokenizer=None)  # type: ignore[arg-type]
    first = rollouts.extra(3, 5, 2)
    second = rollouts.extra(3, 5, 1)
    # Slots 0 and 1 are the step's own prompts; the extra ones continue from 2, never reused.
    assert [r.request_id for r in fleet.requests] == ["3/2/i0", "3/3/i1", "3/4/i2"]
    assert len({r.seed for r in fleet.requests}) == 3
    assert [g.request_id for g in first + second] == ["3/2/i0", "3/3/i1", "3/4/i2"]
    assert all(g.policy_version == 5 and len(g.completions) == G for g in first + second)
