"""The SFT warm start: `learner.sft_steps` supervised steps on the oracle answers, before RL.

A departure from the paper (which starts RL from an instruction-tuned 70B model that already
writes the answer format): a small model almost never writes a well-formed answer, so every
group scores -1 and GRPO has no signal. A few hundred supervised steps on the oracle answers
(the instance's fix written in the answer format, data/prompt.py `oracle_completion`) teach
the format first. Its own loader (seed + 1) over the same data, so the RL data order is
untouched (and its prompts show each instance's files in the seed + 1 order, another
shuffle); the optimizer's moments are reset afterwards (LearnerWorker.reset_optimizer says
why). One line per step goes to <run_dir>/sft_metrics.jsonl.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from conf.config import TrainConfig
from conf.progress import Progress
from data.loader import InstanceLoader
from learner.batch import TrainSample
from learner.group import LearnerGroup
from reward.oracle import oracle_completion

log = logging.getLogger(__name__)


def warm_start(cfg: TrainConfig, learner: LearnerGroup, tokenizer: Any, run_dir: Path) -> None:
    loader = InstanceLoader.from_config(cfg.data, tokenizer, seed=cfg.seed + 1)
    steps = cfg.learner.sft_steps
    with Progress("sft", "steps", steps, emit=log.info) as progress:
        for step in range(1, steps + 1):
            start = time.perf_counter()
            samples: list[TrainSample] = []
            while len(samples) < cfg.learner.sft_batch_size:
                (item,) = loader.next_batch(1)
                oracle = oracle_completion(tokenizer, item.instance)
                if oracle is not None:
                    samples.append(TrainSample(item.prompt_ids, oracle[1], None, 1.0))
            batches, _ = learner.shard(samples, drop_zero_advantage=False)
            stats = learner.sft_step(batches) | {"sft_step": step, "sft_s": round(time.perf_counter() - start, 3)}
            with open(run_dir / "sft_metrics.jsonl", "a") as f:
                f.write(json.dumps(stats) + "\n")
            progress.update(1, note=f"loss {stats['sft_loss']:.4f}")
    learner.reset_optimizer()  # RL starts with fresh moments
