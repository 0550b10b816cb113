"""One learner rank: a DeepSpeed engine (ZeRO 1/2/3) applying GRPO updates to its data shard.

A plain class; `learner/group.py` makes N of them remote inside a placement group. Rank r
receives its share of each step's batch as padded micro-batches (learner/batch.py); one
optimizer step covers the whole batch (gradient accumulation over the micro-batches), as in
the paper (one update per 512 rollouts).

Gradient scaling: each micro-batch's loss is already divided by the whole step's normaliser
(learner/grpo.py), so the sum over micro-batches and ranks is the step's loss. DeepSpeed
would also divide by the accumulation steps (we pass scale_wrt_gas=False) and averages
gradients over the data-parallel ranks (we multiply by world_size to undo it). The update is
then the gradient of exactly the documented loss, however the batch is split.

CPU vs GPU: gloo vs NCCL for DeepSpeed's group, fp32 vs bf16 (DeepSpeed's bf16 mode keeps
fp32 master weights in the optimizer); both are chosen in `setup` from the device present.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actors import weight_sync
from actors.cluster import node_host
from conf.config import LearnerConfig
from learner import grpo
from learner.batch import MicroBatch, RankBatch
from learner.logprobs import completion_logprobs


def _on_gpu() -> bool:
    return torch.cuda.is_available()


def ds_config(cfg: LearnerConfig, *, dtype: str, micro_batches: int, world_size: int) -> dict[str, Any]:
    """The DeepSpeed config, derived from LearnerConfig (DeepSpeed's own JSON is not exposed:
    one home per default). The learning rate is set per step by the worker (warmup, SFT)."""
    zero: dict[str, Any] = {"stage": cfg.zero_stage, "overlap_comm": _on_gpu(), "contiguous_gradients": True}
    if cfg.zero_stage == 3:
        # Keep every parameter partitioned between uses, so weight sync can gather bucket by bucket.
        zero.update(stage3_param_persistence_threshold=0, stage3_prefetch_bucket_size=int(5e7))
    return {
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": micro_batches,
        "train_batch_size": cfg.micro_batch_size * micro_batches * world_size,
        "optimizer": {"type": "AdamW", "params": {"lr": cfg.lr, "betas": [0.9, 0.999], "eps": 1e-8,
                                                   "weight_decay": cfg.weight_decay, "torch_adam": True}},
        "gradient_clipping": cfg.grad_clip,
        # We own the accumulation boundary: a step's micro-batch count varies (zero-advantage
        # rows are not trained), so backward() accumulates and step() is the boundary.
        "managed_gradient_accumulation": False,
        "zero_optimization": zero,
        "bf16": {"enabled": dtype == "bfloat16"},
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


def lr_at(cfg: LearnerConfig, update: int) -> float:
    """Constant learning rate after a linear warmup over `warmup_steps` updates."""
    if cfg.warmup_steps <= 0:
        return cfg.lr
    return cfg.lr * min(1.0, (update + 1) / cfg.warmup_steps)


class LearnerWorker:
    def __init__(self, cfg: LearnerConfig, *, model_path: str, dtype: str, temperature: float, rank: int,
                 world_size: int, micro_batches: int, seed: int) -> None:
        self.cfg, self.model_path, self.dtype, self.temperature = cfg, model_path, dtype, temperature
        self.rank, self.world_size, self.micro_batches, self.seed = rank, world_size, micro_batches, seed
        self.updates = 0  # optimizer steps applied = the policy_version of these weights
        self._sync_group: Any = None
        self._sync_plan: list[weight_sync.Bucket] | None = None
        self._listen: dict[str, Any] = {}  # purpose -> socket held for a TCPStore this rank hosts

    # -- set-up ---------------------------------------------------------------------------

    def reserve_port(self, purpose: str) -> tuple[str, int]:
        """Open a listening socket on this node for a store this rank will host ("deepspeed":
        the learner group's rendezvous; "sync": the weight-sync group's). Returns (host, port)."""
        sock = weight_sync.listen_socket(node_host())
        self._listen[purpose] = sock
        return sock.getsockname()[0], sock.getsockname()[1]

    def setup(self, master_addr: str, master_port: int) -> dict[str, Any]:
        os.environ.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port), RANK=str(self.rank),
                          WORLD_SIZE=str(self.world_size), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
        if not _on_gpu():
            os.environ["DS_ACCELERATOR"] = "cpu"
        import deepspeed
        from transformers import AutoModelForCausalLM

        backend = "nccl" if _on_gpu() else "gloo"
        # Our own store (listening on master_addr only), then DeepSpeed adopts the initialised group.
        store = weight_sync.make_store(master_addr, master_port, self.world_size, 1800.0, self._listen.pop("deepspeed", None))
        torch.distributed.init_process_group(backend, store=store, rank=self.rank, world_size=self.world_size)
        deepspeed.init_distributed(dist_backend=backend)
        torch.manual_seed(self.seed)
        config = ds_config(self.cfg, dtype=self.dtype, micro_batches=self.micro_batches, world_size=self.world_size)
        self._hf_ds_config = self._zero3_init_context(config)  # must outlive from_pretrained
        model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
        if self.cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        self.ref = self._load_reference(config) if self.cfg.kl_coef > 0 else None
        return {"rank": self.rank, "pid": os.getpid(), "params": sum(p.numel() for p in model.parameters())}

    def _zero3_init_context(self, config: dict[str, Any]) -> Any:
        if self.cfg.zero_stage != 3:
            return None
        # transformers partitions weights at load time while this object is alive (ZeRO-3 init).
        from transformers.integrations import HfDeepSpeedConfig

        return HfDeepSpeedConfig(config)

    def _load_reference(self, config: dict[str, Any]) -> torch.nn.Module:
        """The frozen initial policy for the KL term (loaded only when kl_coef > 0)."""
        import deepspeed
        from transformers import AutoModelForCausalLM

        ref = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32).eval()
        ref.requires_grad_(False)
        if self.cfg.zero_stage != 3:
            return ref.to(torch.bfloat16) if self.dtype == "bfloat16" else ref
        # ZeRO-3: partition the reference too (no optimizer), or each rank holds a full copy.
        ref_config = {k: v for k, v in config.items() if k not in ("optimizer", "gradient_clipping")}
        return deepspeed.initialize(model=ref, config=ref_config)[0].module

    # -- training -------------------------------------------------------------------------

    def _tensors(self, mb: MicroBatch) -> dict[str, torch.Tensor]:
        device = self.engine.device
        # torch.tensor copies: arrays from the object store are read-only views of shared memory.
        return {k: torch.tensor(getattr(mb, k), device=device)
                for k in ("input_ids", "attention_mask", "prompt_lens", "completion_mask", "logprobs_old", "advantages")}

    def _logprobs(self, model: torch.nn.Module, t: dict[str, torch.Tensor], temperature: float,
                  with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        return completion_logprobs(model, t["input_ids"], t["attention_mask"], t["prompt_lens"],
                                   t["completion_mask"].shape[1], temperature=temperature,
                                   chunk_tokens=self.cfg.logprob_chunk_tokens, with_entropy=with_entropy)

    def _set_lr(self, lr: float) -> None:
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr

    def train_step(self, batch: RankBatch) -> dict[str, float]:
        """One GRPO update over this rank's share; returns sums that the group adds up."""
        self._set_lr(lr_at(self.cfg, self.updates))
        self.engine.train()
        sums: dict[str, float] = {"loss": 0.0, "tokens": 0.0, "clip_frac": 0.0, "approx_kl_old": 0.0,
                                  "ratio_mean": 0.0, "kl_ref": 0.0, "entropy": 0.0}
        for mb in batch.micro_batches:
            t = self._tensors(mb)
            logprobs, entropy = self._logprobs(self.engine.module, t, self.temperature, with_entropy=True)
            # NaN marks samples without engine logprobs: their behaviour policy is this one.
            old = torch.where(torch.isnan(t["logprobs_old"]), logprobs.detach(), t["logprobs_old"])
            ref = None
            if self.ref is not None:
                with torch.no_grad():
                    ref = self._logprobs(self.ref, t, self.temperature)[0]
            loss, stats = grpo.policy_loss(
                logprobs, old, ref, t["advantages"], t["completion_mask"], clip_eps=self.cfg.clip_eps,
                kl_coef=self.cfg.kl_coef, aggregation=self.cfg.aggregation,
                num_seqs=batch.num_seqs, num_tokens=batch.num_tokens)
            self.engine.backward(loss * self.world_size, scale_wrt_gas=False)
            n = float(stats["num_tokens"])
            sums["loss"] += loss.item()
            sums["tokens"] += n
            for key in ("clip_frac", "approx_kl_old", "ratio_mean", "kl_ref"):
                if key in stats:
                    sums[key] += float(stats[key]) * n
            sums["entropy"] += float((entropy * t["completion_mask"]).sum())
        self.engine.step()
        self.updates += 1
        sums["grad_norm"] = float(self.engine.get_global_grad_norm() or 0.0)
        return sums

    def sft_step(self, batch: RankBatch) -> dict[str, float]:
        """One supervised step on oracle answers: mean negative logprob per completion token."""
        self._set_lr(self.cfg.sft_lr)
        self.engine.train()
        total = 0.0
        for mb in batch.micro_batches:
            t = self._tensors(mb)
            logprobs, _ = self._logprobs(self.engine.module, t, 1.0)
            loss = -(logprobs * t["completion_mask"]).sum() / batch.num_tokens
            self.engine.backward(loss * self.world_size, scale_wrt_gas=False)
            total += loss.item()
        self.engine.step()
        return {"loss": total, "grad_norm": float(self.engine.get_global_grad_norm() or 0.0)}

    @torch.no_grad()
    def sequence_logprobs(self, token_ids: list[int], temperature: float = 1.0) -> list[float]:
        """Logprob of each token after the first given its prefix (compared with the engine's)."""
        self.engine.eval()
        ids = torch.tensor([token_ids], device=self.engine.device)
        lp, _ = completion_logprobs(self.engine.module, ids, torch.ones_like(ids), torch.tensor([1], device=ids.device),
                                    len(token_ids) - 1, temperature=temperature)
        return lp[0].float().cpu().tolist()

    # -- weights out ----------------------------------------------------------------------

    def _named_params(self) -> list[tuple[str, torch.nn.Parameter]]:
        # named_parameters() lists a tied weight once (under its first name), so a tied
        # lm_head is not sent: the engine re-ties it after loading.
        return list(self.engine.module.named_parameters())

    def weight_plan(self, bucket_bytes: int, dtype: str) -> list[weight_sync.Bucket]:
        meta = [(n, tuple(getattr(p, "ds_shape", p.shape)), dtype) for n, p in self._named_params()]
        return weight_sync.plan_buckets(meta, bucket_bytes)

    def _gathered(self, params: list[torch.nn.Parameter]) -> Any:
        if self.cfg.zero_stage != 3:
            return nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters(params, modifier_rank=None)

    def _packed_buckets(self, plan: list[weight_sync.Bucket]) -> Iterator[torch.Tensor]:
        """Gather (ZeRO-3, all ranks take part) and pack one bucket at a time; only rank 0 yields."""
        params = dict(self._named_params())
        for bucket in plan:
            tensors = [params[s.name] for s in bucket.slots]
            with self._gathered(tensors):
                if self.rank == 0:
                    yield weight_sync.pack(bucket, [p.data for p in tensors])

    def sync_join(self, spec: weight_sync.SyncGroupSpec, plan: list[weight_sync.Bucket]) -> None:
        self._sync_plan = plan
        if self.rank == 0:
            self._sync_group = weight_sync.join_group(spec, 0, self._listen.pop("sync"))

    def sync_send(self) -> int:
        assert self._sync_plan is not None, "sync_join first"
        flats = self._packed_buckets(self._sync_plan)
        if self.rank != 0:
            for _ in flats:  # take part in the ZeRO-3 gathers
                pass
            return 0
        return weight_sync.send(self._sync_group, flats)

    def packed_arrays(self, plan: list[weight_sync.Bucket]) -> list[np.ndarray]:
        """The same buckets as numpy arrays, for the object-store path (rank 0's list)."""
        return [weight_sync.to_array(flat) for flat in self._packed_buckets(plan)]

    def param_digest(self) -> str:
        """Hash of the full parameters (rank 0), to prove an update changed them."""
        h = hashlib.sha256()
        for _, p in self._named_params():
            with self._gathered([p]):
                h.update(p.data.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()

    def save_hf(self, out_dir: str) -> str | None:
        """Hugging Face export of the current policy (rank 0 writes; all ranks gather)."""
        params = [p for _, p in self._named_params()]
        with self._gathered(params):
            if self.rank != 0:
                return None
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            self.engine.module.save_pretrained(out, state_dict={k: v.detach().cpu() for k, v in
                                                                self.engine.module.state_dict().items()})
            for name in os.listdir(self.model_path):
                if "token" in name or name in ("chat_template.jinja", "generation_config.json", "special_tokens_map.json"):
                    shutil.copy2(Path(self.model_path) / name, out / name)
        return str(out)
