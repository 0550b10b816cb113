"""Capacity plan of the p5_512 preset: an estimated step time for each split of the 512 GPUs.

    python bench/capacity.py [--data ../shared/data]
    python bench/capacity.py --node      # the gpu_node preset: a 7B model on one node of 8 GPUs

A model, not a measurement: no GPU is reachable from here. Every output number is an ESTIMATE,
computed from three kinds of input, printed separately (docs/capacity.md explains each):
- PUBLISHED: H100 SXM and p5.48xlarge figures, Llama-3.3-70B's architecture, the paper's time;
- MEASURED HERE (2-core CPU machine): prompt lengths of real SWE-bench instances built with
  the project's prompt; the reward's CPU seconds per rollout on real answers (reward actors run
  on CPUs on the cluster too); the learner's rank balance, by the trainer's own sharding code
  (learner.batch.snake_order) on the modelled lengths;
- ASSUMED: completion lengths, achieved fractions of peak (MFU, HBM and network efficiency),
  ZeRO-3 overlap. Changing one shows how much the conclusion depends on it (last table).

One synchronous step = generate + reward + train + sync (the phases do not overlap):
- generate: each engine (tensor parallel TP) prefills its prompts once (the 16 samples share
  them through the prefix cache), then decodes until its longest sample ends. Decoding is
  memory-bandwidth bound: each step reads the engine's weights and the KV cache of every live
  sequence, split over TP GPUs, plus 2 all-reduces per layer. Engines get whole prompts (the
  fleet dispatches prompts), so more than 32 engines leave some idle.
- train: each learner rank (1 GPU, ZeRO-3) runs its rows, dealt by snake_order, in
  micro-batches as large as memory allows; per micro-batch, compute (8 x params FLOPs per token
  with activation recomputation, plus attention) and ZeRO-3 traffic (weights gathered for the
  forward and for the backward, gradients reduce-scattered: 3 x 140 GB per rank over EFA),
  partly overlapped. The slowest rank sets the time.
- sync: the learner gathers the bf16 weights bucket by bucket and broadcasts each bucket to
  every engine GPU (one after the other, as actors/driver/weight_sync.py does).
- reward: the step's rollouts spread over the reward actors, at the measured CPU cost.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from data.prompt import build_messages, encode_prompt  # noqa: E402
from data.schema import Instance  # noqa: E402
from learner.batch import snake_order  # noqa: E402
from reward import score_output  # noqa: E402

GB = 1e9
# conf/cluster/p5_512.yaml: (rollout GPUs, tensor parallel size).
PRESET = (128, 8)


@dataclass(frozen=True)
class Published:
    peak_flops: float = 989e12  # H100 SXM dense bf16 FLOP/s (NVIDIA data sheet)
    hbm_bytes_s: float = 3.35e12  # H100 SXM HBM3 bandwidth
    nvlink_bytes_s: float = 900e9  # H100 NVLink 4, per GPU (both directions)
    efa_bytes_s_node: float = 400e9  # p5.48xlarge: 3,200 Gbit/s of EFA per node
    gpus_per_node: int = 8
    gpu_mem: float = 80 * GB
    params: float = 70.6e9  # Llama-3.3-70B-Instruct (Llama 3 70B architecture)
    layers: int = 80
    d_model: int = 8192
    kv_heads: int = 8
    head_dim: int = 128
    paper_step_s: float = 32 * 3600 / 1600  # SWE-RL: 1,600 steps in ~32 h on 512 H100

    @property
    def weight_bytes(self) -> float:  # bf16
        return 2 * self.params

    @property
    def kv_bytes_per_token(self) -> float:  # K and V, bf16, all layers
        return self.layers * self.kv_heads * self.head_dim * 2 * 2


@dataclass(frozen=True)
class Assumed:
    prompts: int = 32  # paper: 32 issues x 16 samples per step
    group: int = 16
    max_prompt: int = 12288  # the preset: prompts over this are dropped
    completion_mean: float = 2000.0  # tokens; exponential, cut at completion_max (the paper gives neither)
    completion_max: int = 4096
    hbm_eff: float = 0.6  # fraction of HBM bandwidth a decode step achieves
    prefill_mfu: float = 0.5  # fraction of peak during prefill (large matmuls)
    allreduce_s: float = 10e-6  # one small TP all-reduce over NVLink (latency bound)
    step_overhead_s: float = 1e-3  # scheduler and sampling per decode step
    train_mfu: float = 0.4  # fraction of peak for the learner's matmuls at 8-16k tokens
    net_eff: float = 0.7  # fraction of EFA bandwidth NCCL achieves for large collectives
    zero3_overlap: float = 0.7  # fraction of ZeRO-3 traffic hidden behind compute (prefetch)
    act_bytes_per_token: float = (80 + 15) * 8192 * 2  # checkpointed layer inputs + one layer's recompute
    learner_reserve: float = 8 * GB  # gathered layers, buffers, fragmentation
    zero_adv_frac: float = 0.0  # rows of zero-signal groups skipped by the learner (none assumed)
    reward_workers: int = 64  # the preset


# conf/cluster/gpu_node.yaml: Qwen2.5-Coder-7B-Instruct (7.62e9 parameters, 28 layers, d_model
# 3,584, 4 KV heads of 128: its config.json) on one node, where ZeRO-3's collectives and the
# weight sync run over NVLink: the per-GPU "network" is NVLink's 450 GB/s in one direction.
NODE_PUBLISHED = Published(params=7.62e9, layers=28, d_model=3584, kv_heads=4, head_dim=128, efa_bytes_s_node=8 * 450e9)
# The 7B's activations per token with checkpointing, as learner/memory.py counts them (29 saved
# hidden states + one layer recomputed, 26.4 d), and its reserve (the gathered 545M-parameter
# embedding and its gradient, buckets: 4.3 GB, + 4 GB of runtime); 8 reward actors.
NODE_ASSUMED = Assumed(act_bytes_per_token=(28 + 1 + 26.4) * 3584 * 2, learner_reserve=8.3 * GB, reward_workers=8)
NODE_PRESET = (4, 2)


@dataclass(frozen=True)
class Measured:
    prompt_tokens: list[int]  # real instances' prompts (stand-in tokenizer)
    reward_s: float  # CPU seconds per rollout (mean over real answers)
    source: str


# -- measured here ---------------------------------------------------------------------------


def _bench_reward_module(data: Path):  # bench/reward.py builds model-like answers from real data
    spec = importlib.util.spec_from_file_location("bench_reward", ROOT / "bench" / "reward.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(data: Path) -> Measured | None:
    path = data / "requests_lite.jsonl"
    if not path.exists():
        return None
    from transformers import AutoTokenizer

    from conf.config import ModelConfig
    from learner.models import resolve

    tokenizer = AutoTokenizer.from_pretrained(resolve(ModelConfig()))  # SmolLM2's, Llama-3-like BPE
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    prompts = [
        len(
            encode_prompt(
                tokenizer,
                build_messages(
                    Instance(
                        r["instance_id"], "psf/requests", "", r["problem_statement"], "", None, r["code_context"], {}
                    ),
                    seed=0,  # the file order changes no length
                ),
            )
        )
        for r in rows
    ]
    cases = _bench_reward_module(data).output_cases(data)
    start = time.perf_counter()
    for _, (context, oracle, output) in cases:
        score_output(context, oracle, output, max_pair_seconds=10.0)
    reward_s = (time.perf_counter() - start) / len(cases)
    return Measured(prompts, reward_s, f"{len(rows)} psf/requests instances, {len(cases)} real answers")


# -- the model -------------------------------------------------------------------------------


def step_lengths(m: Measured, a: Assumed, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and completion tokens of one step's rollouts, [prompts, group] each."""
    rng = np.random.default_rng(seed)
    prompt = np.minimum(rng.choice(m.prompt_tokens, size=a.prompts), a.max_prompt)
    completion = np.minimum(rng.exponential(a.completion_mean, size=(a.prompts, a.group)), a.completion_max)
    completion[0, 0] = a.completion_max  # some sample reaches the cap in a step of 512
    return np.repeat(prompt[:, None], a.group, axis=1), np.maximum(completion.astype(int), 1)


def engine_seconds(prompt: np.ndarray, completion: np.ndarray, tp: int, p: Published, a: Assumed) -> float:
    """Prefill once per prompt, then decode until the longest sample of this engine ends."""
    prefill_flops = sum(2 * p.params * n + 2 * p.layers * p.d_model * n * n for n in prompt[:, 0])
    seconds = prefill_flops / (tp * p.peak_flops * a.prefill_mfu)
    t = np.arange(int(completion.max()))
    live = completion.reshape(-1)[None, :] > t[:, None]  # [steps, sequences]
    kv_tokens = (live * (prompt.reshape(-1)[None, :] + t[:, None])).sum(axis=1)
    read = (p.weight_bytes + kv_tokens * p.kv_bytes_per_token) / tp
    memory_s = read / (p.hbm_bytes_s * a.hbm_eff)
    compute_s = 2 * p.params * live.sum(axis=1) / (tp * p.peak_flops * a.prefill_mfu)
    # 2 all-reduces per layer of the live sequences' hidden states (bf16), ring over NVLink.
    allreduce = a.allreduce_s + 2 * live.sum(axis=1) * p.d_model * 2 / p.nvlink_bytes_s
    comm_s = 2 * p.layers * allreduce if tp > 1 else 0.0
    return float(seconds + (np.maximum(memory_s, compute_s) + comm_s + a.step_overhead_s).sum())


def generate_seconds(
    prompt: np.ndarray, completion: np.ndarray, engines: int, tp: int, p: Published, a: Assumed
) -> float:
    busy = min(engines, len(prompt))
    per = -(-len(prompt) // busy)
    return max(
        engine_seconds(prompt[i : i + per], completion[i : i + per], tp, p, a) for i in range(0, len(prompt), per)
    )


def max_micro_batch(ranks: int, rows: int, p: Published, a: Assumed) -> int:
    """Largest micro-batch (<= rows per rank) whose activations, at the longest possible
    sequence, fit next to the rank's ZeRO-3 shards."""
    shards = 16 * p.params / ranks  # bf16 weights + grads, fp32 master + Adam moments
    free = 0.9 * p.gpu_mem - shards - a.learner_reserve
    fit = int(free // ((a.max_prompt + a.completion_max) * a.act_bytes_per_token))
    return max(0, min(fit, -(-rows // ranks)))


def lockstep_seconds(lengths: np.ndarray, ranks: int, mb: int, p: Published, a: Assumed) -> float:
    """Ranks run micro-batch k together (ZeRO-3's gathers are collectives; shard() gives every
    rank the same count, padding with empty ones): the step is the sum over k of the slowest."""
    comm = 3 * p.weight_bytes / (p.efa_bytes_s_node / p.gpus_per_node * a.net_eff)
    per_rank = [
        [lengths[idx[j : j + mb]] for j in range(0, len(idx), mb)] for idx in snake_order(lengths.tolist(), ranks)
    ]
    total = 0.0
    for k in range(max(len(r) for r in per_rank)):
        flops = max(
            (8 * p.params * len(seqs) * seqs.max() + sum(8 * p.layers * p.d_model * int(n) ** 2 for n in seqs))
            for r in per_rank
            if k < len(r)
            for seqs in [r[k]]
        )
        total += max(comm, flops / (p.peak_flops * a.train_mfu) + (1 - a.zero3_overlap) * comm)
    return total


def train_seconds(
    prompt: np.ndarray, completion: np.ndarray, ranks: int, p: Published, a: Assumed
) -> tuple[float, int]:
    """The fastest micro-batch size that fits (larger ones pad to their longest row but gather
    the weights fewer times); (inf, 0) when not even one sequence fits."""
    lengths = (prompt + completion).reshape(-1)
    keep = lengths[: round(len(lengths) * (1 - a.zero_adv_frac))]
    options = [
        (lockstep_seconds(keep, ranks, mb, p, a), mb) for mb in range(1, max_micro_batch(ranks, len(keep), p, a) + 1)
    ]
    return min(options) if options else (float("inf"), 0)


def sync_seconds(p: Published, a: Assumed) -> float:
    per_gpu_net = p.efa_bytes_s_node / p.gpus_per_node * a.net_eff
    return 2 * p.weight_bytes / per_gpu_net  # gather on the learner, then broadcast to the engines


def reward_seconds(m: Measured, a: Assumed) -> float:
    return -(-a.prompts * a.group // a.reward_workers) * m.reward_s


@dataclass(frozen=True)
class Row:
    rollout_gpus: int
    tp: int
    engines: int
    learner_gpus: int
    micro_batch: int
    generate: float
    train: float
    sync: float
    reward: float

    @property
    def step(self) -> float:
        return self.generate + self.train + self.sync + self.reward


def sweep(
    m: Measured, p: Published, a: Assumed, total: int = 512, tps: tuple[int, ...] = (4, 8), stride: int = 64
) -> list[Row]:
    prompt, completion = step_lengths(m, a)
    rows = []
    for tp in tps:
        for rollout_gpus in range(stride, total, stride):
            if rollout_gpus % tp:
                continue
            engines, learner = rollout_gpus // tp, total - rollout_gpus
            train, mb = train_seconds(prompt, completion, learner, p, a)
            rows.append(
                Row(
                    rollout_gpus,
                    tp,
                    engines,
                    learner,
                    mb,
                    generate_seconds(prompt, completion, engines, tp, p, a),
                    train,
                    sync_seconds(p, a),
                    reward_seconds(m, a),
                )
            )
    return rows


# -- report ------------------------------------------------------------------------------------


def print_table(rows: list[Row], p: Published, total: int = 512) -> Row:
    best = min(rows, key=lambda r: r.step)
    print(f"ESTIMATED seconds per step (sync mode) for each split of {total} GPUs:")
    print(
        " rollout GPUs  TP  engines | learner GPUs  micro-batch | generate  reward   train    sync |   step  vs paper"
    )
    for r in sorted(rows, key=lambda r: (r.tp, r.rollout_gpus)):
        mark = "  <- best" if r is best else ""
        train = f"{r.train:7.1f}" if r.micro_batch else "  (OOM)"
        step = f"{r.step:6.1f}  {r.step / p.paper_step_s:5.2f}x" if r.micro_batch else "     -       -"
        print(
            f" {r.rollout_gpus:12d} {r.tp:3d} {r.engines:8d} | {r.learner_gpus:12d} {r.micro_batch:12d} | "
            f"{r.generate:8.1f} {r.reward:7.2f} {train} {r.sync:7.1f} | {step}{mark}"
        )
    return best


def sensitivity(m: Measured, p: Published, a: Assumed) -> None:
    print(
        "\nSensitivity: the best split when one assumption changes, and the preset's split "
        f"({PRESET[0]} rollout GPUs at TP {PRESET[1]}) under the same change (ESTIMATES):"
    )
    variants = [
        ("as above", a),
        ("completion mean 1,000", replace(a, completion_mean=1000.0)),
        ("completion mean 3,000", replace(a, completion_mean=3000.0)),
        ("completion max 8,192", replace(a, completion_max=8192, max_prompt=8192)),
        ("HBM efficiency 0.4", replace(a, hbm_eff=0.4)),
        ("HBM efficiency 0.8", replace(a, hbm_eff=0.8)),
        ("train MFU 0.25", replace(a, train_mfu=0.25)),
        ("train MFU 0.55", replace(a, train_mfu=0.55)),
        ("no ZeRO-3 overlap", replace(a, zero3_overlap=0.0)),
        ("half the rows zero-advantage", replace(a, zero_adv_frac=0.5)),
    ]
    for name, variant in variants:
        rows = sweep(m, p, variant)
        best = min(rows, key=lambda r: r.step)
        preset = next(r for r in rows if (r.rollout_gpus, r.tp) == PRESET)
        print(
            f"  {name:30s} best: {best.rollout_gpus:3d} rollout GPUs (TP {best.tp}) + {best.learner_gpus:3d} learner "
            f"-> {best.step:5.1f} s/step (generate {best.generate:.0f}, train {best.train:.0f}, sync {best.sync:.0f}); "
            f"preset {preset.step:5.1f} s"
        )


def node_plan(m: Measured, p: Published, a: Assumed) -> int:
    rows = sweep(m, p, a, total=8, tps=(1, 2, 4), stride=2)
    best = print_table(rows, p, total=8)
    preset = next(r for r in rows if (r.rollout_gpus, r.tp) == NODE_PRESET)
    print(
        f"\nBest split (ESTIMATE): {best.rollout_gpus} rollout GPUs as {best.engines} engine(s) of TP {best.tp}, "
        f"{best.learner_gpus} learner ranks: {best.step:.0f} s per step; the preset's ({preset.engines} engines of "
        f"TP {preset.tp}, {preset.learner_gpus} ranks): {preset.step:.0f} s."
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--node", action="store_true", help="the gpu_node preset: 7B on one node of 8 GPUs")
    args = parser.parse_args()
    p, a = (NODE_PUBLISHED, NODE_ASSUMED) if args.node else (Published(), Assumed())
    m = measure(args.data)
    if m is None:
        m = Measured([6000], 0.01, f"ASSUMED (no {args.data}/requests_lite.jsonl): 6,000-token prompts, 10 ms/rollout")
    print(
        f"PUBLISHED: H100 {p.peak_flops / 1e12:.0f} TFLOP/s bf16, HBM {p.hbm_bytes_s / 1e12:.2f} TB/s, "
        f"{'NVLink' if args.node else 'EFA'} {p.efa_bytes_s_node / GB:.0f} GB/s per node; "
        f"{p.params / 1e9:.1f}B: {p.weight_bytes / GB:.0f} GB bf16, "
        f"KV {p.kv_bytes_per_token / 2**20:.2f} MiB/token; paper (70B, 512 GPUs) {p.paper_step_s:.0f} s/step"
    )
    print(
        f"MEASURED here ({m.source}): prompt tokens mean {statistics.mean(m.prompt_tokens):,.0f}, "
        f"max {max(m.prompt_tokens):,} (SmolLM2 tokenizer); reward {m.reward_s * 1e3:.1f} ms CPU per rollout"
    )
    print(
        "ASSUMED: "
        + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in asdict(a).items())
        + "\n"
    )
    if args.node:
        return node_plan(m, p, a)
    best = print_table(sweep(m, p, a), p)
    print(
        f"\nBest split (ESTIMATE): {best.rollout_gpus} rollout GPUs as {best.engines} engines of TP {best.tp}, "
        f"{best.learner_gpus} learner ranks: {best.step:.0f} s per step against the paper's ~{p.paper_step_s:.0f} s."
    )
    sensitivity(m, p, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
