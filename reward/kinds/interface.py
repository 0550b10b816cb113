"""Reward kinds: how one model output is scored against one instance, chosen by `reward.kind`.

A kind is a class registered under a name in `REWARDS`. The reward workers (actors/driver/reward_pool.py)
are generic: each holds one kind object (built on the driver from the config and shipped to
the workers) and calls

    state = kind.prepare(instance)      once per instance per worker: the group's 16 outputs
                                        (and every batch of them) share it
    result = kind.score(state, output)  per output; returns a RewardResult, never raises for
                                        a bad output (a malformed one is reward -1 with a reason)

Adding a kind is one new file in reward/kinds/ (a subclass with `@REWARDS.register("name")`)
and its name in the package's import line (reward/kinds/__init__.py); the names `reward.kind`
accepts are the registered ones, checked where the kinds are loaded (`make_reward`, and the
trainer's start-up check, actors/plugins.py), and a test can register one in the test file itself.

Pure Python: no Ray, torch or numpy (the instance and config types are imported for annotations only).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from conf.registry import Registry
from reward.core import RewardResult
from reward.kinds.outcomes import score_patch

if TYPE_CHECKING:
    from conf.config import RewardConfig
    from data.schema import Instance


class RewardKind(ABC):
    """One way of scoring outputs. Built once on the driver (`make_reward`) and pickled to every
    reward worker: keep its attributes small and picklable (settings, not caches)."""

    # Whether the kind starts the test-runner pool (its actors count in the start-up resource check).
    uses_test_pool: ClassVar[bool] = False

    def __init__(self, cfg: RewardConfig) -> None:
        self.cfg = cfg

    @abstractmethod
    def prepare(self, instance: Instance) -> Any:
        """Per-instance state shared by every output scored against it (e.g. the oracle's diffs)."""

    @abstractmethod
    def score(self, state: Any, output: str) -> RewardResult:
        """The reward of one output; a bad output is a result with a reason, not an exception."""

    def score_batch(self, items: list[tuple[Any, str]]) -> list[RewardResult]:
        """(state, output) pairs of one batch, scored in order; kinds whose scoring waits on
        something else (running tests) override it to wait for the batch at once."""
        return [self.score(state, output) for state, output in items]

    def score_patches(self, items: list[tuple[Instance, str]]) -> list[RewardResult]:
        """Final patches rather than answers (an agent's episode: the diff of its tree), each
        against its instance: rule 6, the similarity of the unified diffs to the oracle patch
        (never -1: an episode's patch has no format to break). Kinds that run tests override it."""
        return [score_patch("similarity", inst, patch, None, self.cfg.max_pair_seconds) for inst, patch in items]

    def stats(self) -> dict[str, float]:
        """Counters for the trainer's metrics (cumulative), read on the driver."""
        return {}

    def shutdown(self) -> None:  # noqa: B027 - optional hook: most kinds start nothing
        """Release what the kind started on the driver (the test-runner pool)."""


REWARDS: Registry[type[RewardKind]] = Registry("reward kind", "reward.kind")


def make_reward(cfg: RewardConfig) -> RewardKind:
    """The kind `cfg.kind` names, configured; an unknown name lists the registered ones."""
    return REWARDS.get(cfg.kind)(cfg)
