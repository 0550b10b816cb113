"""Benchmark: a learner step with shared prefixes vs per sample (learner/shared_prefix.py).

    python bench/learner.py [--shapes default,swe,agent] [--batch FILE] [--budgets 4096] [--repeats 1]

One learner step = every micro-batch of the step's samples, as `learner.shard` makes them for
one rank, through `logprobs_of` (the policy's forward), the GRPO loss (`ppo_token`, the
schema's settings) and its backward: what a rank does in `train_step`, without DeepSpeed and
without the optimizer's update (the same in both variants). Variants:
- "per-sample": micro-batches of `learner.micro_batch_size` (1, the default) samples;
- "shared@N": shared-prefix segments in micro-batches of at most N distinct tokens.

Shapes (each a whole step on one rank):
- default: the default job's step, from `--batch` (a file that `trainer.record_batch` wrote),
  else synthetic with its shapes: 2 prompts of 1,100 and 1,000 tokens x 8 samples of 120-320
  completion tokens (rollout.max_new_tokens=320; the longest ones cut there);
- swe: SWE-RL-shaped, scaled to a loaded 2-core machine: 16 samples of one prompt 8x as long
  as a completion (768 + 96 tokens);
- agent: agent episodes: a prompt of 600 tokens x 8 episodes of 3 turns (60 sampled tokens,
  then a 150-token observation the loss mask hides).

Each (shape, variant) runs in its own process (alternating, `--repeats` times): it loads the
model, allocates its gradients, warms up on a short batch, then times one step. Peak memory is
that process's resident-set high-water mark (`resource.getrusage`, ru_maxrss) after the step,
and the step's own increment (the high-water mark after it minus before it). Besides wall
seconds, the step's CPU seconds (user + system, the same getrusage): on a shared machine whose
load moves the wall clock by tens of percent between runs, the CPU time is the steadier measure
of the work (one thread: wall = CPU on a quiet machine). The parent prints medians and ratios to
"per-sample", and checks that the variants' losses agree.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conf.config import LearnerConfig, ModelConfig  # noqa: E402
from learner import models  # noqa: E402
from learner.batch import TrainSample, load_samples, shard  # noqa: E402
from learner.objectives.losses import LOSSES  # noqa: E402
from learner.worker import logprobs_of, loss_inputs, micro_batch_tensors  # noqa: E402

MAX_NEW = 320  # the default job's rollout.max_new_tokens


def _tokens(g: torch.Generator, vocab: int, n: int) -> list[int]:
    return torch.randint(10, vocab, (n,), generator=g).tolist()


def synthetic(shape: str, vocab: int) -> list[TrainSample]:
    g = torch.Generator().manual_seed(0)
    samples: list[TrainSample] = []

    def old(n: int) -> list[float]:
        return (-1.0 - torch.rand(n, generator=g)).tolist()

    def adv() -> float:
        return float(torch.randn(1, generator=g))

    if shape == "default":
        for prompt_len in (1100, 1000):
            prompt = _tokens(g, vocab, prompt_len)
            for _ in range(8):
                n = int(torch.randint(120, MAX_NEW + 40, (1,), generator=g).clamp(max=MAX_NEW))
                samples.append(TrainSample(prompt, _tokens(g, vocab, n), old(n), adv(), truncated=n == MAX_NEW))
    elif shape == "swe":
        prompt = _tokens(g, vocab, 768)
        samples = [TrainSample(prompt, _tokens(g, vocab, 96), old(96), adv()) for _ in range(16)]
    elif shape == "agent":
        for _ in range(1):
            prompt = _tokens(g, vocab, 600)
            for _ in range(8):
                ids: list[int] = []
                mask: list[float] = []
                for _turn in range(3):
                    ids += _tokens(g, vocab, 60 + 150)
                    mask += [1.0] * 60 + [0.0] * 150
                samples.append(TrainSample(prompt, ids, old(len(ids)), adv(), loss_mask=mask))
    else:
        raise ValueError(f"--shapes: unknown shape {shape!r} (default, swe, agent)")
    return samples


def load_model(model_dir: str, dtype: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    model.train()
    for p in model.parameters():  # allocated up front: the step's increment is then activations
        p.grad = torch.zeros_like(p)
    return model


def learner_step(model: torch.nn.Module, samples: list[TrainSample], budget: int | None) -> float:
    """One rank's forward + backward over the step's samples; returns the loss."""
    cfg = LearnerConfig()
    (batch,), _ = shard(
        samples,
        num_ranks=1,
        micro_batch_size=cfg.micro_batch_size,
        pad_id=0,
        drop_zero_advantage=True,
        max_tokens_per_micro_batch=budget,
    )
    total = 0.0
    for mb in batch.micro_batches:
        t = micro_batch_tensors(mb, "cpu")
        lp, _ = logprobs_of(
            model,
            t,
            completion_len=t["completion_mask"].shape[1],
            temperature=1.0,
            chunk_tokens=cfg.logprob_chunk_tokens,
            with_entropy=True,
        )
        inputs = loss_inputs(
            cfg, lp, t, None, num_seqs=batch.num_seqs, num_tokens=batch.num_tokens, max_new_tokens=MAX_NEW
        )
        loss, _ = LOSSES.get(cfg.loss)(inputs, cfg)
        loss.backward()
        total += float(loss.detach())
    return total


def child(args: argparse.Namespace) -> None:
    """One (shape, variant) in this process: prints a JSON line of seconds and memory."""
    torch.set_num_threads(args.threads)
    model = load_model(args.model_dir, args.dtype)
    vocab = model.config.vocab_size
    samples = load_samples(args.batch) if args.shape == "default" and args.batch else synthetic(args.shape, vocab)
    budget = None if args.variant == "per-sample" else int(args.variant.split("@")[1])
    learner_step(model, [TrainSample(s.prompt_ids[:16], s.completion_ids[:8], None, 1.0) for s in samples[:2]], budget)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    loss = learner_step(model, samples, budget)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    peak, before = after.ru_maxrss / 1024, usage.ru_maxrss / 1024
    print(json.dumps({"s": seconds, "cpu_s": cpu, "peak_mib": peak, "step_mib": peak - before, "loss": loss}))


def run_variant(args: argparse.Namespace, model_dir: str, shape: str, variant: str) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", "--shape", shape, "--variant", variant, "--model-dir", model_dir]
    cmd += ["--dtype", args.dtype, "--threads", str(args.threads)] + (["--batch", args.batch] if args.batch else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def describe(samples: list[TrainSample], budget: int) -> str:
    (batch,), _ = shard(
        samples, num_ranks=1, micro_batch_size=1, pad_id=0, drop_zero_advantage=True, max_tokens_per_micro_batch=budget
    )
    total = sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples)
    distinct = 0
    for mb in batch.micro_batches:
        assert mb.segments is not None
        lengths = mb.attention_mask.sum(axis=1)
        distinct += sum(p + int(lengths[f : f + n].sum()) - n * p for f, n, p in mb.segments.tolist())
    return f"{len(samples)} samples, {total:,} tokens per sample, {distinct:,} distinct at budget {budget}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="default,swe,agent")
    ap.add_argument("--batch", default="", help="the default job's samples (trainer.record_batch's file)")
    ap.add_argument("--budgets", default="4096", help="max_tokens_per_micro_batch values of the shared variants")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="bfloat16", help="the default job's learner dtype")
    ap.add_argument("--model", default="", help="a Hugging Face directory (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shape", default="", help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="", help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    model_dir = args.model or models.resolve(ModelConfig())
    variants = ["per-sample"] + [f"shared@{b}" for b in args.budgets.split(",")]
    print(f"model {model_dir}; {args.dtype}, {args.threads} threads; load average {os.getloadavg()[0]:.1f}")
    for shape in args.shapes.split(","):
        samples = load_samples(args.batch) if shape == "default" and args.batch else synthetic(shape, 49152)
        print(f"\n{shape}: {describe(samples, int(args.budgets.split(',')[0]))}")
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v in variants:
                runs[v].append(run_variant(args, model_dir, shape, v))
        keys = ("s", "cpu_s", "peak_mib", "step_mib")
        base = {k: statistics.median(r[k] for r in runs["per-sample"]) for k in keys}
        print(
            f"  {'variant':<13}{'s/step':>8}{'speed-up':>10}{'CPU s':>8}{'CPU ratio':>11}"
            f"{'peak MiB':>10}{'peak ratio':>12}{'step MiB':>10}"
        )
        for v in variants:
            m = {k: statistics.median(r[k] for r in runs[v]) for k in keys}
            print(
                f"  {v:<13}{m['s']:>8.1f}{base['s'] / m['s']:>10.2f}"
                f"{m['cpu_s']:>8.1f}{base['cpu_s'] / m['cpu_s']:>11.2f}"
                f"{m['peak_mib']:>10.0f}{m['peak_mib'] / base['peak_mib']:>12.2f}{m['step_mib']:>10.0f}"
            )
        losses = {v: runs[v][0]["loss"] for v in variants}
        print(f"  losses: {', '.join(f'{v} {x:.6f}' for v, x in losses.items())}")
        print(f"  load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
