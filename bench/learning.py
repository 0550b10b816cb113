"""The learning setting shared by tests/test_learning.py and bench/recipes.py: the smoke preset's
tiny model on one demo instance, an SFT warm start that teaches the answer format, then GRPO
steps, with the reward measured on a fixed-seed sample (common random numbers) before and after.

One home for its overrides and its measurement, so that the test's evidence and the recipe
table are about the same setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hydra import compose, initialize_config_dir

from actors.driver.reward_pool import ScoreJob
from actors.rollout.actor import GenerationRequest
from conf import config
from data.demo import demo_parquet_path
from data.loader import PromptItem
from reward.core import exact_match, oracle_diffs, score_with_oracle_diffs

INSTANCE = "demo__calspan-3"
EVAL_SEED = 1234  # the sampling seed of every fixed-seed measurement
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"

# The overrides of the setting (run_dir, data.path, seed and trainer.steps are the caller's).
OVERRIDES = [
    "experiment=smoke",
    # One instance, four times per step: also checks that a step may hold an instance twice.
    "trainer.prompts_per_step=4",
    "trainer.verify_sync=false",
    "trainer.checkpoint_every=1000",
    "rollout.oracle_samples_per_group=0",
    "rollout.max_new_tokens=256",
    "learner.sft_steps=60",
    "learner.sft_lr=3e-3",
    "learner.lr=1e-4",
    "learner.micro_batch_size=4",
]


def one_instance(out_dir: Path) -> Path:
    """A parquet file holding only INSTANCE of the demo set."""
    table = pq.read_table(demo_parquet_path())
    path = out_dir / "one.parquet"
    pq.write_table(table.filter(pc.equal(table["instance_id"], INSTANCE)), path)
    return path


def compose_config(run_dir: Path, data: Path, *, seed: int, steps: int, extra: Sequence[str] = ()) -> Any:
    """The setting's typed config, with `extra` overrides last (a recipe's keys)."""
    config.register()
    base = [f"run_dir={run_dir}", f"data.path={data}", f"seed={seed}", f"trainer.steps={steps}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return config.load(compose("config", overrides=[*OVERRIDES, *base, *extra]))


def fixed_seed_reward(trainer: Any, item: PromptItem, samples: int = 256) -> tuple[float, float]:
    """(mean reward, format error rate) of `samples` completions drawn with EVAL_SEED."""
    request = GenerationRequest(f"eval/{item.instance_id}", item.prompt_ids, samples, EVAL_SEED)
    (result,) = trainer.fleet.generate([request])
    jobs = [ScoreJob(f"eval/{j}", item.instance_id, c.text) for j, c in enumerate(result.completions)]
    rewards = [s.result.reward for s in trainer.rewards.score(jobs, {item.instance_id: item.instance})]
    return float(np.mean(rewards)), float(np.mean([r == -1 for r in rewards]))


def fixed_seed_scores(trainer: Any, item: PromptItem, samples: int = 256) -> dict[str, float]:
    """The same samples as fixed_seed_reward, scored here by the paper's rule whatever kind the
    run trains with (so that runs with other reward kinds compare on one scale): the mean
    similarity reward, the format error rate and the exact-match rate (what `discrete` rewards)."""
    request = GenerationRequest(f"eval/{item.instance_id}", item.prompt_ids, samples, EVAL_SEED)
    (result,) = trainer.fleet.generate([request])
    inst, cap = item.instance, trainer.cfg.reward.max_pair_seconds
    oracle = oracle_diffs(inst.code_context, inst.oracle_new_content)
    texts = [c.text for c in result.completions]
    rewards = [score_with_oracle_diffs(inst.code_context, oracle, t, max_pair_seconds=cap).reward for t in texts]
    exact = [exact_match(inst.code_context, inst.oracle_new_content, t).reward == 1.0 for t in texts]
    return {
        "reward": float(np.mean(rewards)),
        "format_error_rate": float(np.mean([r == -1 for r in rewards])),
        "exact_rate": float(np.mean(exact)),
    }


def first_item(trainer: Any) -> PromptItem:
    """The instance's prompt, the loader rewound so that training starts from the beginning."""
    (item,) = trainer.loader.next_batch(1)
    trainer.loader.load_state_dict({**trainer.loader.state_dict(), "epoch": 0, "position": 0})
    return item
