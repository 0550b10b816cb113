"""Benchmark: completion logprobs in chunks (learner/logprobs.py) vs the naive full-logits way.

    python bench/logprobs.py [--batch 2 --prompt-len 128 --completion-len 1024 --chunks 1024,256]

Both variants run forward + backward of the mean completion-token logprob on the same batch,
with the real vocabulary of SmolLM2-135M-Instruct (49,152 tokens; built once by
`learner.models.resolve`), in float32 on the CPU:
- "full": `sequence_logprobs_reference`, the computation one writes first: logits for every
  position [B, L, V], float32 log_softmax over all of them, gather;
- "chunk=N": `completion_logprobs` with `chunk_tokens=N`: the decoder's hidden states, then
  only the completion positions are projected, N at a time, each chunk recomputed in backward.

Both are run without and with activation checkpointing of the decoder layers: with it (the
setting of large models, `learner.gradient_checkpointing`) the stored activations shrink to one
hidden state per layer and the logits become the largest tensor of the step.

Prints, per variant, the mean seconds per forward+backward (variants interleaved, medians over
`--repeats`) and the peak memory above the model and its gradient buffers, each as a ratio to
"full". Peak memory is that of the tensors allocated during one step (model weights and gradient
buffers excluded), from the allocator's record (torch.profiler's memory timeline): exact, unlike
timings unaffected by the load of a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conf.config import ModelConfig  # noqa: E402
from learner import models  # noqa: E402
from learner.logprobs import completion_logprobs, sequence_logprobs_reference  # noqa: E402


def load(model_dir: str, grad_ckpt: bool) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    if grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    for p in model.parameters():  # allocated up front: the peak then measures activations only
        p.grad = torch.zeros_like(p)
    return model


def make_batch(vocab: int, batch: int, prompt_len: int, completion_len: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, prompt_len + completion_len), generator=g)
    return {
        "input_ids": ids,
        "prompt_lens": torch.full((batch,), prompt_len),
        "mask": torch.ones(batch, completion_len),
    }


def step(model: torch.nn.Module, b: dict[str, torch.Tensor], variant: str) -> torch.Tensor:
    """One forward + backward of the mean completion logprob; returns the logprobs [B, T]."""
    T = b["mask"].shape[1]
    if variant == "full":
        lp = sequence_logprobs_reference(model, b["input_ids"], b["prompt_lens"], T)
    else:
        chunk = int(variant.split("=")[1])
        lp, _ = completion_logprobs(
            model, b["input_ids"], torch.ones_like(b["input_ids"]), b["prompt_lens"], T, chunk_tokens=chunk
        )
    ((lp * b["mask"]).sum() / b["mask"].sum()).backward()
    return lp.detach()


def peak_mib(model: torch.nn.Module, b: dict[str, torch.Tensor], variant: str) -> float:
    """Peak MiB of tensors allocated during one step (the allocator's own record, through the
    profiler's memory timeline: exact and unaffected by the machine's load or by malloc)."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step(model, b, variant)
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    totals = [sum(s) for s in sizes]
    return (max(totals) - totals[0]) / 2**20


def compare(args: argparse.Namespace, model_dir: str, grad_ckpt: bool) -> None:
    model = load(model_dir, grad_ckpt)
    b = make_batch(model.config.vocab_size, args.batch, args.prompt_len, args.completion_len)
    variants = ["full"] + [f"chunk={c}" for c in args.chunks.split(",")]
    print(f"\nactivation checkpointing of the decoder layers: {'on' if grad_ckpt else 'off'}")
    outputs = {v: step(model, b, v) for v in variants}  # warm-up, and the values agree
    for v in variants[1:]:
        print(f"  max |{v} - full| logprob: {(outputs[v] - outputs['full']).abs().max().item():.2e}")
    times: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.repeats):
        for v in variants:
            start = time.perf_counter()
            step(model, b, v)
            times[v].append(time.perf_counter() - start)
    peaks = {v: peak_mib(model, b, v) for v in variants}
    t_full, m_full = statistics.median(times["full"]), peaks["full"]
    print(f"  {'variant':<12}{'s/step':>9}{'time/full':>11}{'peak MiB':>10}{'peak/full':>11}")
    for v in variants:
        t = statistics.median(times[v])
        print(f"  {v:<12}{t:>9.2f}{t / t_full:>11.2f}{peaks[v]:>10.0f}{peaks[v] / m_full:>11.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="", help="a Hugging Face directory (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--completion-len", type=int, default=1024)
    ap.add_argument("--chunks", default="1024,256", help="chunk_tokens values to compare with the full logits")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model_dir = args.model or models.resolve(ModelConfig())
    print(
        f"model {model_dir}; batch {args.batch} x ({args.prompt_len} prompt + {args.completion_len} completion) "
        f"tokens; float32, {args.threads} threads; forward + backward of the mean completion logprob"
    )
    for grad_ckpt in (False, True):
        compare(args, model_dir, grad_ckpt)


if __name__ == "__main__":
    main()
