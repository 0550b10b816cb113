"""The driver's data and generate phases: which prompts a step gets, how far generation runs
ahead, which groups are too stale to train on, and the oracle injection.

    prefetch(step)               the `data` phase: the step's prompts come from the loader and
                                 are queued on the fleet; in async mode (`trainer.mode=async`)
                                 so are the next `trainer.max_staleness` steps', so the engines
                                 generate them while the learner trains (each step's prompts are
                                 fetched once: the loader's cursor before them is kept for the
                                 checkpoint)
    collect(step, version)       the `generate` phase: the step's groups, in prompt order. A group
                                 sampled more than max_staleness updates before `version` (async
                                 mode only) is dropped, counted and regenerated. Then the last
                                 `rollout.oracle_samples_per_group` samples of each group are
                                 replaced by the instance's oracle answer (guided GRPO for models
                                 too weak to produce a valid patch; 0 = the paper's pure on-policy
                                 sampling): finish_reason "oracle", no engine logprobs.
    extra(step, version, count)  more groups of fresh prompts for the step (DAPO's dynamic
                                 sampling; actors/driver/dynamic_sampling.py decides how many)

A group's request id is "<step>/<slot>/<instance_id>" and its sampling seed is derived from
(seed, request id), so a step's groups are reproducible whatever engine samples them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from actors.agent.episode import task_messages
from actors.rollout.actor import Completion, EpisodeTask, GenerationRequest, GenerationResult, request_seed
from actors.rollout.fleet import RolloutFleet
from conf.config import TrainConfig
from data.loader import InstanceLoader, PromptItem
from data.prompt import build_messages
from data.schema import Instance
from learner.batch import TrainSample
from learner.objectives.advantages import Estimator
from learner.objectives.overlong import length_penalty
from reward.oracle import oracle_completion


def request_id(step: int, slot: int, instance_id: str) -> str:
    """The id of a step's `slot`-th group. The slot keeps ids unique when an instance occurs
    twice in one step (a data set smaller than prompts_per_step, or an epoch boundary)."""
    return f"{step}/{slot}/{instance_id}"


@dataclass(frozen=True)
class Group:
    """One prompt's samples, as the rest of the step sees them."""

    request_id: str
    item: PromptItem
    completions: list[Completion]  # group_size of them; oracle-injected ones last
    policy_version: int  # of the engine weights that sampled the group
    actor_id: str

    @property
    def sampled(self) -> list[Completion]:
        """The policy's own samples (the oracle-injected ones left out)."""
        return [c for c in self.completions if c.finish_reason != "oracle"]


# How an agent episode ended when a limit cut it (actors/agent/episode.py EndedBy): left out of
# the loss unless agent.keep_cut_episodes (DeepSWE's compact filtering); "infra": its session
# failed, left out of the loss and of its group's statistics (advantages_of). A session limit
# ("limit_*": what the policy put in its own tree) is neither: the policy's failure, trained on.
CUT_BY_LIMIT = frozenset({"max_turns", "max_tokens", "timeout"})


def train_samples(groups: Sequence[Group], advantages: Sequence[float], keep_cut: bool = False) -> list[TrainSample]:
    """One TrainSample per completion, in group order, with its advantage. Oracle samples carry
    no engine logprobs (None): the learner's own stand in. An agent episode (rollout.mode=agent)
    is its prompt and its whole sequence of turns, the loss on its sampled tokens only; cut by
    a limit (unless `keep_cut`) or failed by the infrastructure, on none of them."""
    pairs = [(g, c) for g in groups for c in g.completions]
    samples = []
    for (g, c), a in zip(pairs, advantages, strict=True):
        mask = c.loss_mask
        if c.episode is not None and (c.finish_reason == "infra" or (c.finish_reason in CUT_BY_LIMIT and not keep_cut)):
            mask = [0.0] * len(c.token_ids)
        samples.append(
            TrainSample(
                g.item.prompt_ids,
                c.token_ids,
                c.logprobs if c.finish_reason != "oracle" else None,
                float(a),
                truncated=c.finish_reason == "length",
                loss_mask=mask,
            )
        )
    return samples


def group_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, group_size: int, estimator: Estimator, cfg: TrainConfig
) -> torch.Tensor:
    """[prompts * group_size] the estimator's advantages (learner.advantage), each group's over
    its valid samples only (valid_samples); an invalid sample's advantage is 0, as is every
    sample of a group with fewer than 2 valid ones (no baseline to compare with)."""
    estimate = lambda r, n: estimator(r, n, cfg.learner)  # noqa: E731
    if bool(valid.all()):
        return estimate(rewards, group_size)
    out = torch.zeros_like(rewards)
    for start in range(0, len(rewards), group_size):
        keep = valid[start : start + group_size]
        n = int(keep.sum())
        if n >= 2:
            group = out[start : start + group_size]  # a view: written in place
            group[keep] = estimate(rewards[start : start + group_size][keep], n)
    return out


def valid_samples(groups: Sequence[Group]) -> torch.Tensor:
    """[prompts * group_size] bool: the samples a group's statistics count (not an agent
    episode whose session failed: a false zero reward would bias the group's baseline)."""
    return torch.tensor([c.finish_reason != "infra" for g in groups for c in g.completions])


def overlong_penalty(groups: Sequence[Group], cfg: TrainConfig) -> torch.Tensor:
    """[prompts * group_size] DAPO's soft overlong penalty of each completion, in group order, to
    add to the rewards (learner/objectives/overlong.py); zeros unless `learner.overlong=soft`. Injected
    oracle answers get none: they were not generated under the limit (one may exceed it), and the
    penalty is there to teach the policy to finish its own answers in time."""
    completions = [c for g in groups for c in g.completions]
    lengths = torch.tensor([len(c.token_ids) for c in completions])
    if cfg.learner.overlong != "soft":
        return torch.zeros(lengths.shape, dtype=torch.float64)
    penalty = length_penalty(lengths, max_new_tokens=cfg.rollout.max_new_tokens, buffer=cfg.learner.overlong_buffer)
    oracle = torch.tensor([c.finish_reason == "oracle" for c in completions])
    return torch.where(oracle, 0.0, penalty)


class Rollouts:
    def __init__(self, cfg: TrainConfig, loader: InstanceLoader, fleet: RolloutFleet, tokenizer: Any) -> None:
        self.cfg, self.loader, self.fleet, self.tokenizer = cfg, loader, fleet, tokenizer
        self.lookahead = cfg.trainer.max_staleness if cfg.trainer.mode == "async" else 0
        self.pending: dict[int, tuple[list[PromptItem], dict[str, Any]]] = {}  # step -> (items, cursor before)
        self.extra_slots: dict[int, int] = {}  # step -> its next free slot for dynamic sampling's prompts

    @staticmethod
    def messages(cfg: TrainConfig) -> Callable[[Instance, int], list[dict[str, str]]]:
        """How the loader prompts an instance: the paper's prompt (the issue and its files), or
        with rollout.mode=agent the agent's system prompt and the issue (the episode reads the
        files itself); data.max_prompt_tokens then counts that prompt."""
        return functools.partial(task_messages, cfg.agent) if cfg.rollout.mode == "agent" else build_messages

    def prefetch(self, step: int) -> None:
        for ahead in range(self.lookahead + 1):
            if step + ahead not in self.pending:
                before = self.loader.state_dict()
                items = self.loader.next_batch(self.cfg.trainer.prompts_per_step)
                self.pending[step + ahead] = (items, before)
                if not self.cfg.trainer.selfplay:  # self-play's step prompts its instances itself (selfplay.py)
                    self.fleet.submit([self._request(step + ahead, slot, it) for slot, it in enumerate(items)])

    def loader_state(self, step: int) -> dict[str, Any]:
        """The loader cursor from which step `step` (not trained yet) fetches its prompts."""
        return self.pending[step][1] if step in self.pending else self.loader.state_dict()

    def _request(self, step: int, slot: int, item: PromptItem) -> GenerationRequest:
        rid = request_id(step, slot, item.instance_id)
        seed = request_seed(self.cfg.seed, rid)
        return GenerationRequest(rid, item.prompt_ids, self.cfg.group_size, seed, episode=self.episode(item))

    def episode(self, item: PromptItem) -> EpisodeTask | None:
        """Agent mode: the group is group_size episodes in sandbox sessions of the item's
        instance (its snapshot at its base commit, or its files); None outside it."""
        if self.cfg.rollout.mode != "agent":
            return None
        return EpisodeTask(item.instance, self.cfg.agent, self.cfg.reward.execution)

    def collect(self, step: int, policy_version: int) -> tuple[list[Group], int]:
        """The step's groups in prompt order, and how many were dropped as too stale."""
        items, _ = self.pending.pop(step)
        ids = [request_id(step, slot, it.instance_id) for slot, it in enumerate(items)]
        results = dict(zip(ids, self.fleet.results(ids), strict=True))
        dropped = 0
        while stale := [
            s for s, i in enumerate(ids) if policy_version - results[i].policy_version > self.cfg.trainer.max_staleness
        ]:
            dropped += len(stale)
            self.fleet.submit([self._request(step, s, items[s]) for s in stale])
            results.update(zip([ids[s] for s in stale], self.fleet.results([ids[s] for s in stale]), strict=True))
        return [self.as_group(it, results[i]) for it, i in zip(items, ids, strict=True)], dropped

    def extra(self, step: int, policy_version: int, count: int) -> list[Group]:
        """`count` more groups for step `step`, of fresh prompts (dynamic sampling,
        actors/driver/dynamic_sampling.py): generated now by the current weights, so never stale.
        Their slots follow the step's regular ones, so request ids and seeds stay unique."""
        first = self.extra_slots.get(step, self.cfg.trainer.prompts_per_step)
        self.extra_slots = {step: first + count}  # earlier steps' counters are done with
        items = self.loader.next_batch(count)
        requests = [self._request(step, first + k, it) for k, it in enumerate(items)]
        self.fleet.submit(requests)
        results = self.fleet.results([r.request_id for r in requests])
        return [self.as_group(it, r) for it, r in zip(items, results, strict=True)]

    def as_group(self, item: PromptItem, result: GenerationResult) -> Group:
        """A result as the step sees it, with `rollout.oracle_samples_per_group` oracle answers last."""
        completions = result.completions
        k = self.cfg.rollout.oracle_samples_per_group
        oracle = oracle_completion(self.tokenizer, item.instance) if k else None
        if oracle is not None:
            completions = completions[:-k] + [Completion(oracle[1], [], oracle[0], "oracle")] * k
        return Group(result.request_id, item, completions, result.policy_version, result.actor_id)
