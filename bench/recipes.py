"""The GRPO recipes side by side, in the learning setting of tests/test_learning.py.

    python bench/recipes.py                        # 5 recipes x 3 seeds x 16 steps (long: hours on 2 cores)
    python bench/recipes.py --seeds 1 --steps 4    # a reduced run
    python bench/recipes.py --seeds 1 --first-seed 2  # one more seed for an earlier run's table
    python bench/recipes.py --recipes grpo gspo    # some of them
    python bench/recipes.py --recipes grpo grpo_discrete  # the paper's reward ablation (section 3.6)

The tiny model on one demo instance (bench/learning.py): one SFT warm start per seed (the same
for every recipe, exported once and loaded as the recipes' initial model), then `--steps` RL
steps per recipe from it. Per recipe it prints, as mean (min..max) over seeds: the fixed-seed
reward after the SFT and after the RL steps (256 samples, one sampling seed: common random
numbers), the format error rate of those samples, the mean clip fraction over the steps, and
the wall time of the RL steps. The recipes' keys are those docs/learner.md names for each paper,
at this setting's scale (DAPO's overlong buffer: a fifth of the 256-token limit).
`grpo_discrete` is GRPO trained on the discrete reward (reward.kind=discrete); every recipe is
measured by the paper's similarity rule (bench/learning.py fixed_seed_scores), plus the
exact-match rate (the discrete reward's 1s) and the mean training reward over the steps in the
kind the recipe trains on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.learning import compose_config, first_item, fixed_seed_reward, fixed_seed_scores, one_instance  # noqa: E402
from conf import logs  # noqa: E402

RECIPES: dict[str, list[str]] = {
    "grpo": [],  # the paper's, the defaults
    "dapo": [
        "learner.aggregation=token_mean",
        "learner.clip_eps_low=0.2",
        "learner.clip_eps_high=0.28",
        "learner.overlong=soft",
        "learner.overlong_buffer=51",
        "trainer.dynamic_sampling=true",
    ],
    "dr_grpo": ["learner.advantage=dr_grpo", "learner.aggregation=seq_mean_token_sum_norm"],
    "gspo": ["learner.loss=gspo", "learner.clip_eps_low=3e-4", "learner.clip_eps_high=4e-4"],
    "rloo": ["learner.advantage=rloo"],
    "grpo_discrete": ["reward.kind=discrete"],  # section 3.6: 1 only for the oracle's exact change
}


def _trainer(cfg: Any) -> Any:
    import train
    from actors.cluster.join import loopback_only

    loopback_only()
    return train.Trainer(cfg)


def warm_start_model(out: Path, data: Path, seed: int) -> tuple[Path, float]:
    """The SFT warm start of `seed`, exported as a Hugging Face model; and its fixed-seed reward."""
    from learner.sft import warm_start

    cfg = compose_config(out / "sft", data, seed=seed, steps=1)  # no RL step is run
    trainer = _trainer(cfg)
    try:
        item = first_item(trainer)
        warm_start(cfg, trainer.learner, trainer.tokenizer, trainer.run_dir)
        trainer.weights.push(trainer.fleet, trainer.policy_version)
        reward, _ = fixed_seed_reward(trainer, item)
        path = Path(trainer.learner.save_hf(str(out / "sft_model")))
    finally:
        trainer.shutdown()
        ray.shutdown()
    return path, reward


def run_recipe(out: Path, data: Path, model: Path, name: str, seed: int, steps: int) -> dict[str, float]:
    """`steps` RL steps of recipe `name` from the warm-started `model`; its numbers."""
    extra = [f"model.name={model}", "learner.sft_steps=0", *RECIPES[name]]
    cfg = compose_config(out / name, data, seed=seed, steps=steps, extra=extra)
    trainer = _trainer(cfg)
    clip, trained = [], []
    try:
        item = first_item(trainer)
        trainer.weights.push(trainer.fleet, trainer.policy_version)
        start = time.perf_counter()
        while trainer.step < steps:
            metrics = trainer.train_step()
            clip.append(metrics["clip_frac"])
            trained.append(metrics["reward_mean"])
            trainer.step += 1
        wall = time.perf_counter() - start
        scores = fixed_seed_scores(trainer, item)
    finally:
        trainer.shutdown()
        ray.shutdown()
    return scores | {"train_reward": statistics.fmean(trained), "clip_frac": statistics.fmean(clip), "wall_s": wall}


def _cell(values: list[float], digits: int) -> str:
    mean = f"{statistics.fmean(values):.{digits}f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):.{digits}f}..{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds per recipe")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds FIRST..FIRST+N-1 (to add seeds to a run)")
    parser.add_argument("--steps", type=int, default=16, help="RL steps per recipe and seed")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    args = parser.parse_args()
    logs.setup()  # the trainers' set-up and SFT progress lines, as train.py shows them
    results: dict[str, list[dict[str, float]]] = {name: [] for name in args.recipes}
    sft_rewards = []
    with tempfile.TemporaryDirectory(prefix="recipes-") as tmp:
        data = one_instance(Path(tmp))
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            out = Path(tmp) / f"seed{seed}"
            model, sft_reward = warm_start_model(out, data, seed)
            sft_rewards.append(sft_reward)
            print(f"[recipes] seed {seed} sft: {{'reward': {sft_reward}}}", flush=True)
            for name in args.recipes:
                results[name].append(run_recipe(out, data, model, name, seed, args.steps))
                print(f"[recipes] seed {seed} {name}: {results[name][-1]}", flush=True)
    print(f"\nreward after SFT: {_cell(sft_rewards, 3)}; {args.seeds} seed(s), {args.steps} RL steps per recipe")
    print(
        "| recipe | reward after RL | format error rate | exact-match rate | training reward (its kind) "
        "| clip fraction | RL wall time (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    columns = (("reward", 3), ("format_error_rate", 3), ("exact_rate", 3), ("train_reward", 3), ("clip_frac", 4))
    for name, rows in results.items():
        cells = [_cell([r[k] for r in rows], d) for k, d in columns]
        print(f"| {name} | {' | '.join(cells)} | {_cell([r['wall_s'] for r in rows], 0)} |")


if __name__ == "__main__":
    main()
