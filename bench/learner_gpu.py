"""Learner throughput on one GPU: a plain-torch GRPO loop vs the project's learner code path.

    python bench/learner_gpu.py [--out results.json]       # one H200: ~3 min
    python bench/learner_gpu.py --tiny                     # CPU: small model, checks correctness

For a machine with torch and transformers only (no Ray, vLLM or DeepSpeed): it imports nothing
of the project but its pure modules (learner.objectives.grpo, learner.logprobs, learner.batch), which are
exactly what each DeepSpeed rank runs per micro-batch. Both paths train the same randomly
initialised Llama-architecture model (bf16 weights, AdamW) on the same batch (default 16 rows
x 2048 tokens, of which the last `--completion-len` are the completion):

- "plain": the loop one writes first: full logits [B, L, V], cast to float32, log_softmax,
  gather, the clipped token loss (token mean);
- "project": `completion_logprobs` (hidden states, then only completion positions through the
  LM head, `--chunk` positions at a time, recomputed in backward) and `grpo.policy_loss`
  (aggregation token_mean, as above), rows collated by `learner.batch.collate`;
- "shared": the same loss with each group's prompt computed once (learner/shared_prefix.py),
  micro-batches by `--max-tokens` distinct tokens (`learner.shard`, as the learner makes them;
  the "micro-batch" column is then not used; its tokens/s and MFU count every row's tokens,
  what the per-sample paths compute, so they are effective rates). Rows come in groups of `--group-size` sharing a
  prompt, as GRPO's do; `--completion-len 256 --seq-len 2304` is the SWE-RL shape (prompt 8x).

Per path and micro-batch size it prints tokens/s (all B x L tokens per optimizer step), the
model FLOPs utilisation 6 x params x tokens/s / peak, with peak = the bf16 matmul rate measured
here by a large matmul, and the peak GPU memory; "OOM" where a configuration does not fit.
Before timing, both paths' losses and gradients are compared on one micro-batch (with --tiny,
in float64, and the script exits non-zero if they differ).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from learner.batch import TrainSample, collate, shard  # noqa: E402
from learner.logprobs import completion_logprobs  # noqa: E402
from learner.objectives import grpo  # noqa: E402
from learner.shared_prefix import shared_prefix_logprobs  # noqa: E402

CLIP_EPS = 0.2
# The default shape: a Llama with 24 layers of width 1024 and a Llama-3 vocabulary.
FULL = dict(
    hidden_size=1024,
    num_hidden_layers=24,
    num_attention_heads=16,
    num_key_value_heads=16,
    intermediate_size=4096,
    vocab_size=128256,
)
TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    intermediate_size=128,
    vocab_size=512,
)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def matmul_tflops(device: torch.device, dtype: torch.dtype, n: int, iters: int) -> float:
    """Measured dense matmul rate (the MFU denominator)."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    sync(device)
    return 2 * n**3 * iters / (time.perf_counter() - start) / 1e12


def build_model(shape: dict[str, int], device: torch.device, dtype: torch.dtype, seq_len: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        **shape,
        tie_word_embeddings=True,
        max_position_embeddings=max(4096, seq_len),
        rms_norm_eps=1e-5,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype).train()


def make_rows(
    vocab: int, rows: int, seq_len: int, completion_len: int, seed: int, group_size: int
) -> list[TrainSample]:
    """Rows of random tokens with random advantages, each `group_size` consecutive rows sharing
    a prompt; logprobs_old are filled in later."""
    g = torch.Generator().manual_seed(seed)
    prompt_len = seq_len - completion_len
    prompts = [torch.randint(0, vocab, (prompt_len,), generator=g).tolist() for _ in range(-(-rows // group_size))]
    return [
        TrainSample(
            prompts[i // group_size],
            torch.randint(0, vocab, (completion_len,), generator=g).tolist(),
            None,
            float(torch.randn(1, generator=g)),
        )
        for i in range(rows)
    ]


def to_tensors(rows: list[TrainSample], device: torch.device) -> dict[str, Any]:
    return mb_tensors(collate(rows, pad_id=0), device)


def mb_tensors(mb: Any, device: torch.device) -> dict[str, Any]:
    t: dict[str, Any] = {
        k: torch.as_tensor(getattr(mb, k)).to(device)
        for k in ("input_ids", "attention_mask", "prompt_lens", "completion_mask", "logprobs_old", "advantages")
    }
    t["segments"] = None if mb.segments is None else [tuple(int(x) for x in s) for s in mb.segments]
    return t


def shared_micro_batches(rows: list[TrainSample], max_tokens: int, device: torch.device) -> list[dict[str, Any]]:
    """The rows as the learner's shared-prefix micro-batches (one rank)."""
    (batch,), _ = shard(
        rows,
        num_ranks=1,
        micro_batch_size=1,
        pad_id=0,
        drop_zero_advantage=False,
        max_tokens_per_micro_batch=max_tokens,
    )
    return [mb_tensors(mb, device) for mb in batch.micro_batches]


def project_loss(model: torch.nn.Module, t: dict[str, Any], chunk: int, num_tokens: float) -> torch.Tensor:
    args = (model, t["input_ids"], t["attention_mask"], t["prompt_lens"])
    if t["segments"] is None:
        lp, _ = completion_logprobs(*args, t["completion_mask"].shape[1], chunk_tokens=chunk)
    else:
        lp, _ = shared_prefix_logprobs(*args, t["segments"], t["completion_mask"].shape[1], chunk_tokens=chunk)
    loss, _ = grpo.policy_loss(
        lp,
        t["logprobs_old"],
        None,
        t["advantages"],
        t["completion_mask"],
        clip_eps=CLIP_EPS,
        kl_coef=0.0,
        aggregation="token_mean",
        num_tokens=num_tokens,
    )
    return loss


def plain_loss(model: torch.nn.Module, t: dict[str, torch.Tensor], chunk: int, num_tokens: float) -> torch.Tensor:
    del chunk
    logits = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).logits  # [B, L, V]
    logits = logits.float() if logits.dtype in (torch.bfloat16, torch.float16) else logits  # (--tiny: float64)
    logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, t["input_ids"][:, 1:, None]).squeeze(-1)  # [B, L-1]
    prompt_len, comp_len = int(t["prompt_lens"][0]), t["completion_mask"].shape[1]  # equal lengths here
    lp = logp[:, prompt_len - 1 : prompt_len - 1 + comp_len]
    ratio = torch.exp(lp - t["logprobs_old"])
    adv = t["advantages"][:, None]
    per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - CLIP_EPS, 1 + CLIP_EPS) * adv)
    return (per_token * t["completion_mask"]).sum() / num_tokens


# "shared" is the project's loss on shared-prefix micro-batches (their `segments` select the path).
LOSSES: dict[str, Callable[..., torch.Tensor]] = {"plain": plain_loss, "project": project_loss, "shared": project_loss}


@torch.no_grad()
def fill_old_logprobs(
    model: torch.nn.Module, rows: list[TrainSample], device: torch.device, chunk: int
) -> list[TrainSample]:
    """Behaviour logprobs = the model's own plus noise, so ratios move around 1 and some clip."""
    out = []
    for i, r in enumerate(rows):
        t = to_tensors([r], device)
        lp, _ = completion_logprobs(
            model, t["input_ids"], t["attention_mask"], t["prompt_lens"], len(r.completion_ids), chunk_tokens=chunk
        )
        noise = 0.1 * torch.randn(lp.shape, generator=torch.Generator().manual_seed(i)).to(device)
        out.append(TrainSample(r.prompt_ids, r.completion_ids, (lp.float() + noise)[0].cpu().tolist(), r.advantage))
    return out


def check_paths_agree(
    model: torch.nn.Module, rows: list[TrainSample], chunk: int, max_tokens: int, strict: bool
) -> dict[str, float]:
    """Loss and gradient of the three paths on `rows` (one micro-batch, or the shared path's);
    with `strict` (float64), raise if they differ. Transformers' RMSNorm computes in float32,
    and the shared path sums the rows' gradients before it, the others after: the shared path
    agrees to float32 round-off (1e-6), the other two to float64's."""
    device = next(model.parameters()).device
    micro = {"plain": [to_tensors(rows, device)], "project": [to_tensors(rows, device)]}
    micro["shared"] = shared_micro_batches(rows, max_tokens, device)
    num_tokens = float(sum(len(r.completion_ids) for r in rows))
    results = {}
    for name, fn in LOSSES.items():
        model.zero_grad(set_to_none=True)
        loss = sum(fn(model, t, chunk, num_tokens) for t in micro[name])
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1).double() for p in model.parameters()])
        results[name] = (float(loss.detach()), grad)
    model.zero_grad(set_to_none=True)
    (l_plain, g_plain), (l_proj, g_proj), (l_shared, g_shared) = (results[k] for k in ("plain", "project", "shared"))
    scale = g_plain.abs().max().clamp(min=1e-30)
    grad_err = float((g_plain - g_proj).abs().max() / scale)
    shared_err = float((g_shared - g_proj).abs().max() / scale)
    report = {
        "loss_plain": l_plain,
        "loss_project": l_proj,
        "loss_shared": l_shared,
        "grad_max_rel_diff": grad_err,
        "shared_grad_max_rel_diff": shared_err,
    }
    if strict and (abs(l_plain - l_proj) > 1e-9 * max(1.0, abs(l_plain)) or grad_err > 1e-9 or shared_err > 1e-6):
        raise SystemExit(f"the paths disagree: {report}")
    return report


def time_path(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    micro: list[dict[str, torch.Tensor]],
    loss_fn: Callable,
    chunk: int,
    steps: int,
    warmup: int,
    device: torch.device,
) -> dict[str, Any]:
    """Optimizer steps over all micro-batches (gradient accumulation); median seconds per step."""
    num_tokens = float(sum(t["completion_mask"].sum() for t in micro))
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(warmup + steps):
        sync(device)
        start = time.perf_counter()
        for t in micro:
            loss_fn(model, t, chunk, num_tokens).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")
    return {"s_per_step": statistics.median(times), "peak_gib": peak}


def run(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else (torch.float64 if args.tiny else torch.float32)
    shape = TINY if args.tiny else dict(FULL, intermediate_size=args.intermediate)
    rows, seq_len, comp_len = (4, 48, 32) if args.tiny else (args.rows, args.seq_len, args.completion_len)
    if args.tiny:
        args.chunk = 8  # several chunks, so the chunked path is the one checked
    peak = matmul_tflops(
        device, dtype if device.type == "cuda" else torch.float32, 512 if args.tiny else 8192, 3 if args.tiny else 50
    )
    model = build_model(shape, device, dtype, seq_len)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), {dtype}; "
        f"measured matmul peak {peak:.3g} TFLOP/s"
    )
    print(
        f"model: Llama {shape}, tied embeddings: {params:,} parameters ({params / 1e9:.3f} B); "
        f"batch {rows} x {seq_len} tokens ({comp_len} completion), chunk {args.chunk}"
    )
    rows_in = make_rows(shape["vocab_size"], rows, seq_len, comp_len, seed=0, group_size=args.group_size)
    data = fill_old_logprobs(model, rows_in, device, args.chunk)
    result: dict[str, Any] = {
        "device": str(device),
        "dtype": str(dtype),
        "params": params,
        "peak_tflops": peak,
        "rows": rows,
        "seq_len": seq_len,
        "completion_len": comp_len,
        "chunk": args.chunk,
        "runs": [],
    }
    result["agreement"] = check_paths_agree(model, data[:2], args.chunk, args.max_tokens, strict=args.tiny)
    print(f"agreement on one micro-batch: {result['agreement']}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device.type == "cuda")
    for micro_rows in args.micro_rows if not args.tiny else [2]:
        per_sample = [to_tensors(data[i : i + micro_rows], device) for i in range(0, rows, micro_rows)]
        for name in ("plain", "project", "shared"):
            if name == "shared" and micro_rows != (args.micro_rows[0] if not args.tiny else 2):
                continue  # micro-batches by tokens: one run
            micro = shared_micro_batches(data, args.max_tokens, device) if name == "shared" else per_sample
            entry: dict[str, Any] = {"path": name, "micro_rows": micro_rows if name != "shared" else 0}
            try:
                entry |= time_path(
                    model,
                    opt,
                    micro,
                    LOSSES[name],
                    args.chunk,
                    args.steps if not args.tiny else 2,
                    1 if args.tiny else args.warmup,
                    device,
                )
                tokens_s = rows * seq_len / entry["s_per_step"]
                entry |= {"tokens_per_s": tokens_s, "mfu": 6 * params * tokens_s / (peak * 1e12)}
            except torch.cuda.OutOfMemoryError:  # (the name older torch releases also have)
                entry["oom"] = True
            if entry.get("oom"):  # outside the except block, whose traceback still holds the tensors
                opt.zero_grad(set_to_none=True)
                gc.collect()
                torch.cuda.empty_cache()
            result["runs"].append(entry)
            print(format_entry(entry), flush=True)
    assert "deepspeed" not in sys.modules and "ray" not in sys.modules and "vllm" not in sys.modules
    return result


def format_entry(e: dict[str, Any]) -> str:
    rows = f"micro-batch {e['micro_rows']:>2} rows" if e["micro_rows"] else "micro-batches by tokens"
    head = f"  {e['path']:<8} {rows}: "
    if e.get("oom"):
        return head + "OOM"
    mem = "" if math.isnan(e["peak_gib"]) else f", peak {e['peak_gib']:.1f} GiB"
    return head + f"{e['tokens_per_s']:>10,.0f} tokens/s, MFU {e['mfu']:.1%}, {e['s_per_step']:.3f} s/step{mem}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="small model on the CPU, float64: a correctness check")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--completion-len", type=int, default=1536)
    ap.add_argument("--intermediate", type=int, default=FULL["intermediate_size"])
    ap.add_argument("--micro-rows", type=int, nargs="+", default=[16, 4], help="rows per forward/backward to try")
    # learner.logprob_chunk_tokens default (conf/config.py is not imported: hydra may be absent there)
    ap.add_argument("--chunk", type=int, default=256, help="learner.logprob_chunk_tokens")
    ap.add_argument("--group-size", type=int, default=16, help="rows sharing a prompt")
    ap.add_argument("--max-tokens", type=int, default=16384, help="learner.max_tokens_per_micro_batch (shared)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default="", help="also write the results as JSON here")
    args = ap.parse_args()
    result = run(args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
