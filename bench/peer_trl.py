"""The default job's GRPO part beside Hugging Face TRL's `GRPOTrainer` on the same job.

    pip install -e ".[bench]"        # trl, for this script only (never a trainer dependency)
    python bench/peer_trl.py --out runs/peer_trl --steps 4 [train.py overrides ...]

Both trainers start from one warm-started model and see the same prompts in the same order,
scored by the same reward, with the same group size, learning rate, steps and completion
length; both are then measured by the same probe (the project's `trainer.probe_prompts`: fixed
prompts, fixed sampling seeds, the engine in the default job's dtype). Phases, each a process
of its own so that no library's threads or caches leak into another's timing:

    warm      bench/warm_start.py: the default job's SFT warm start, exported (OUT/warm)
    project   train.py from OUT/warm with learner.sft_steps=0 for --steps steps: its probe's
              "start" is the warm-started policy, its "end" the project's result
    trl       this script: GRPOTrainer from OUT/warm on the prompts the project's steps drew
              (read back from its rollout logs), saved to OUT/trl/model
    probe     train.py from OUT/trl/model for one step at learner.lr=0: its "start" probe is
              TRL's result, measured exactly as the project's

What is the same on both sides: GRPO advantages (group mean and std), the per-token clipped
ratio with clip 0.2, sequences weighed equally (TRL's `loss_type="grpo"`, the project's
`seq_mean_token_mean`), no KL (beta 0), AdamW (weight decay `learner.weight_decay`), gradient
clipping at `learner.grad_clip`, constant learning rate, sampling at `rollout.temperature` with
no top-p/top-k truncation, one optimizer step per batch of `trainer.prompts_per_step` prompts x
`group_size` samples. What differs, and why: TRL generates with transformers' `generate` (TRL
1.16 accepts vLLM 0.22-0.31 only; the project runs vLLM 0.32), in float32 (its fastest CPU path
here; the project's engine and learner run the default job's bfloat16), in one process on the
machine's cores, while the project spreads an engine, reward actors and 2 learner ranks over
them through Ray. TRL takes the prompt as the project's chat-templated prompt text; the script
prints how many of its token ids TRL's tokenization reproduces.

Prints one table: seconds per step, generated tokens per second, and the two probes, with the
project / TRL ratios. docs/benchmarks.md ("Beside TRL") records a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def run(cmd: Sequence[str], log: Path) -> None:
    """A phase as a child process, its output in `log`; a failure names the log."""
    print(f"[peer] {' '.join(cmd)}  (log: {log})", flush=True)
    with open(log, "w") as f:
        code = subprocess.call(list(cmd), cwd=REPO, stdout=f, stderr=subprocess.STDOUT)
    if code:
        raise SystemExit(f"[peer] failed with exit code {code}: see the end of {log}")


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def probes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """label -> the training split's probe measurement (its last line per label)."""
    return {row["label"]: row["train"] for row in jsonl(run_dir / "probe.jsonl") if "train" in row}


def compose(overrides: Sequence[str]) -> Any:
    """train.py's config for these overrides (the default job's recipe unless they say otherwise)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from conf import config

    config.register()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return config.load(hydra_compose("config", overrides=["run_dir=runs/peer_trl_unused", *overrides]))


def project_prompts(cfg: Any, tokenizer: Any, project_dir: Path, steps: int) -> list[Any]:
    """The prompts the project's steps drew, in order: the trainer's loader replayed from the
    same seed, checked against the instance ids in the project's rollout logs."""
    from data.loader import InstanceLoader

    loader = InstanceLoader.from_config(cfg.data, tokenizer, seed=cfg.seed)
    items = []
    for step in range(1, steps + 1):
        batch = loader.next_batch(cfg.trainer.prompts_per_step)
        logged = []
        for row in jsonl(project_dir / "rollouts" / f"step_{step:06d}.jsonl"):
            if row["instance_id"] not in logged:
                logged.append(row["instance_id"])
        drawn = [it.instance_id for it in batch]
        if drawn != logged:
            raise SystemExit(f"[peer] step {step}: the project trained on {logged}, the replayed loader drew {drawn}")
        items += batch
    return items


class _Timing:
    """Wall seconds of each optimizer step and of generation inside it, and tokens generated."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.generate_s = 0.0
        self.tokens = 0


def train_trl(cfg: Any, model_dir: Path, out: Path, items: list[Any], steps: int) -> _Timing:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from reward.kinds.rule import Similarity

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = [tokenizer.decode(it.prompt_ids) for it in items]
    pairs = list(zip(texts, items, strict=True))
    same = sum(tokenizer(t, add_special_tokens=False)["input_ids"] == it.prompt_ids for t, it in pairs)
    print(f"[peer] TRL's tokenization of the prompt text reproduces {same} of {len(items)} prompts' ids", flush=True)
    kind = Similarity(cfg.reward)
    states = {it.instance_id: kind.prepare(it.instance) for it in items}

    def similarity(prompts: list[str], completions: list[str], instance_id: list[str], **_: Any) -> list[float]:
        return [kind.score(states[i], c).reward for i, c in zip(instance_id, completions, strict=True)]

    timing = _Timing()

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            timing.steps.append(time.perf_counter() - self.start)

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    generate = model.generate

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = generate(*args, **kwargs)
        timing.generate_s += time.perf_counter() - start
        prompt_len = kwargs["input_ids"].shape[1] if "input_ids" in kwargs else args[0].shape[1]
        new = result[:, prompt_len:]
        timing.tokens += int((new != tokenizer.pad_token_id).sum())
        return result

    model.generate = timed_generate  # an instance attribute: this model's calls only
    group, per_step = cfg.group_size, cfg.trainer.prompts_per_step
    args = GRPOConfig(
        output_dir=str(out / "trainer"),
        max_steps=steps,
        per_device_train_batch_size=group * per_step,
        gradient_accumulation_steps=1,
        num_generations=group,
        max_completion_length=cfg.rollout.max_new_tokens,
        temperature=cfg.rollout.temperature,
        top_p=1.0,
        top_k=0,
        learning_rate=cfg.learner.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=cfg.learner.weight_decay,
        max_grad_norm=cfg.learner.grad_clip,
        beta=0.0,
        epsilon=cfg.learner.clip_eps,
        loss_type="grpo",
        scale_rewards="group",
        shuffle_dataset=False,
        use_cpu=True,
        bf16=False,
        seed=cfg.seed,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
    )
    dataset = Dataset.from_list([{"prompt": t, "instance_id": it.instance_id} for t, it in pairs])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[similarity],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[StepTimer()],
    )
    trainer.train()
    model.generate = generate
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(out / "model")
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "peer_trl")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps on each side")
    parser.add_argument("--reuse", action="store_true", help="keep phases whose output is already in --out")
    parser.add_argument("overrides", nargs="*", help="train.py's key=value overrides, applied to both sides")
    args = parser.parse_args()
    try:
        import trl  # noqa: F401
    except ImportError:
        parser.error('TRL is not installed: pip install -e ".[bench]"')
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    warm, project, trl_dir, probe = out / "warm", out / "project", out / "trl", out / "trl_probe"
    if not (args.reuse and (warm / "config.json").is_file()):
        run([py, "bench/warm_start.py", "--out", str(warm), *args.overrides], out / "warm.log")
    common = [f"model.name={warm}", "learner.sft_steps=0", *args.overrides]
    if not (args.reuse and (project / "probe.jsonl").is_file()):
        run([py, "train.py", f"run_dir={project}", f"trainer.steps={args.steps}", *common], out / "project.log")

    cfg = compose(common)
    from learner import models

    items = project_prompts(cfg, models.tokenizer(str(warm)), project, args.steps)
    os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    timing = train_trl(cfg, warm, trl_dir, items, args.steps)
    # TRL's result measured by the project's probe: the "start" of a run from it (its one step,
    # at learning rate 0, changes nothing).
    rest = [o for o in args.overrides if not o.startswith("model.name=")]
    trl_model = f"model.name={trl_dir / 'model'}"
    cmd = [py, "train.py", f"run_dir={probe}", trl_model, "learner.sft_steps=0", "trainer.steps=1", "learner.lr=0"]
    run([*cmd, *rest], out / "trl_probe.log")
    mine = jsonl(project / "metrics.jsonl")
    step_s = sum(m["step_s"] for m in mine) / len(mine)
    gen_tps = sum(m["gen_tokens_per_s"] for m in mine) / len(mine)
    trl_step = sum(timing.steps) / len(timing.steps)
    trl_tps = timing.tokens / timing.generate_s if timing.generate_s else 0.0
    p_project, p_trl = probes(project), probes(probe)
    rows = [
        ("seconds per step", step_s, trl_step, trl_step / step_s),
        ("generated tokens per second", gen_tps, trl_tps, trl_tps / gen_tps if gen_tps else float("nan")),
    ]
    print(f"\nGRPO steps: {args.steps}, prompts per step {cfg.trainer.prompts_per_step} x {cfg.group_size} samples")
    print(f"{'':32s} {'project':>10s} {'TRL':>10s} {'TRL/project':>12s}")
    for name, a, b, ratio in rows:
        print(f"{name:32s} {a:10.1f} {b:10.1f} {ratio:11.2f}x")
    start = p_project["start"]
    print(f"probe reward (warm start)        {start['reward_mean']:10.3f} {start['reward_mean']:10.3f}")
    end, trl_end = p_project["end"]["reward_mean"], p_trl["start"]["reward_mean"]
    print(f"probe reward (after GRPO)        {end:10.3f} {trl_end:10.3f}")
    result = {
        "steps": args.steps,
        "project": {"step_s": step_s, "gen_tokens_per_s": gen_tps, "probe": p_project},
        "trl": {"step_s": trl_step, "gen_tokens_per_s": trl_tps, "step_seconds": timing.steps, "probe": p_trl},
    }
    (out / "peer.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
