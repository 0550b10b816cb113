"""One learner rank: a DeepSpeed engine (ZeRO 1/2/3) applying GRPO updates to its data shard.

A plain class; `learner/group.py` makes N of them remote inside a placement group. Rank r
receives its share of each step's batch as padded micro-batches (learner/batch.py); one
optimizer step covers the whole batch (gradient accumulation over the micro-batches), as in
the paper (one update per 512 rollouts).

Gradient scaling (docs/learner.md has the argument; tests/learner/test_deepspeed.py checks it
against one rank and one micro-batch to float32 round-off): each micro-batch's loss is divided
by the whole step's normaliser (learner/objectives/grpo.py), so the sum over micro-batches and ranks is
the step's loss. With `managed_gradient_accumulation: false` we own the boundary: backward()
only accumulates, step() reduces and applies. `scale_wrt_gas=False` stops DeepSpeed dividing
each loss by its nominal accumulation steps, and the reduction averages over the data-parallel
ranks, which the factor world_size on each loss undoes. The update is the gradient of exactly
the documented loss, however the batch is split.

Every forward of the policy goes through `engine(...)`: the engine wraps `_PolicyLogprobs`,
whose forward is the chunked logprob computation. engine.forward does bookkeeping that a direct
call to the module skips; under ZeRO-3 it advances the micro-step counter without which each
micro-batch's gradient overwrote the previous one instead of adding to it (measured: only the
last micro-batch survived).

CPU vs GPU: the driver decides (conf/device.py) and passes `device`: gloo vs NCCL for
DeepSpeed's group, DeepSpeed's accelerator, overlap_comm. fp32 vs bf16 follows `model.dtype`
(DeepSpeed's bf16 mode keeps fp32 master weights in the optimizer); the GPU preset sets bfloat16.

Weights out: the plan (learner/transport/buckets.py) is set on every rank; `weights_send`
gathers (ZeRO-3) and packs one bucket at a time on every rank, and rank 0 hands the buffers
to the named transport (learner/transport/).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from conf import device as devices
from conf.config import LearnerConfig
from conf.logs import quiet_deepspeed, quiet_stdout
from conf.runtime import Runtime
from learner import hub, models
from learner.batch import MicroBatch, RankBatch
from learner.logprobs import completion_logprobs
from learner.objectives import mismatch
from learner.objectives.losses import LossInputs, PolicyLoss
from learner.rng import rng_states, set_rng_states
from learner.shared_prefix import SegmentSpan, shared_prefix_logprobs, unsupported_reason
from learner.transport import Shipment, TransportCache, WeightTransport
from learner.transport.buckets import Bucket, pack, plan_buckets
from learner.transport.collective import listen_socket, make_store, node_host

log = logging.getLogger(__name__)

_STATE_TAG = "deepspeed"  # save_state's sub-directory for DeepSpeed's files (a fixed name, no "latest" file)
_STATE_META = "learner_state.json"


def ds_config(
    cfg: LearnerConfig, *, dtype: str, micro_batches: int, world_size: int, device: devices.Device
) -> dict[str, Any]:
    """The DeepSpeed config, derived from LearnerConfig (DeepSpeed's own JSON is not exposed:
    one home per default). The learning rate is set per step by the worker (warmup, SFT)."""
    # overlap_comm overlaps the gradient reduction with backward: a GPU feature, and DeepSpeed
    # accepts it with our own accumulation boundary only where gradients are partitioned (2, 3).
    zero: dict[str, Any] = {
        "stage": cfg.zero_stage,
        "overlap_comm": device == "cuda" and cfg.zero_stage >= 2,
        "contiguous_gradients": True,
    }
    if cfg.zero_stage == 3:
        # Keep every parameter partitioned between uses, so weight sync can gather bucket by bucket.
        zero.update(stage3_param_persistence_threshold=0, stage3_prefetch_bucket_size=int(5e7))
    return {
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": micro_batches,
        "train_batch_size": cfg.micro_batch_size * micro_batches * world_size,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": cfg.lr,
                "betas": [0.9, 0.999],
                "eps": 1e-8,
                "weight_decay": cfg.weight_decay,
                "torch_adam": True,
            },
        },
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


def logprobs_of(
    lm: torch.nn.Module,
    t: dict[str, Any],
    *,
    completion_len: int,
    temperature: float,
    chunk_tokens: int,
    with_entropy: bool = False,
    min_segments: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A micro-batch's completion logprobs and entropy [b, T] under `lm`: each shared prefix
    computed once where the micro-batch has segments (learner/shared_prefix.py), else per sample."""
    if t["segments"] is None:
        return completion_logprobs(
            lm,
            t["input_ids"],
            t["attention_mask"],
            t["prompt_lens"],
            completion_len,
            temperature=temperature,
            chunk_tokens=chunk_tokens,
            with_entropy=with_entropy,
        )
    return shared_prefix_logprobs(
        lm,
        t["input_ids"],
        t["attention_mask"],
        t["prompt_lens"],
        t["segments"],
        completion_len,
        temperature=temperature,
        chunk_tokens=chunk_tokens,
        with_entropy=with_entropy,
        min_segments=min_segments,
    )


def loss_inputs(
    cfg: LearnerConfig,
    logprobs: torch.Tensor,
    t: dict[str, Any],
    ref: torch.Tensor | None,
    *,
    num_seqs: float,
    num_tokens: float,
    max_new_tokens: int,
) -> LossInputs:
    """What the policy loss reads of one micro-batch, given the policy's logprobs [b, T]."""
    engine = t["logprobs_old"]  # the engine's sampling logprobs; NaN where unknown (oracle answers)
    # NaN marks samples without engine logprobs: their behaviour policy is this one. With
    # TIS the ratio is against the learner's own, the engine's entering through the weight.
    learner_old = logprobs.detach()
    old = learner_old if cfg.tis_cap else torch.where(torch.isnan(engine), learner_old, engine)
    tis = mismatch.tis_log_weights(learner_old, engine) if cfg.tis_cap else None
    return LossInputs(
        logprobs,
        old,
        ref,
        t["advantages"],
        t["completion_mask"],
        num_seqs=num_seqs,
        num_tokens=num_tokens,
        max_new_tokens=max_new_tokens,
        tis_log_weights=tis,
    )


def micro_batch_tensors(mb: MicroBatch, device: torch.device | str) -> dict[str, Any]:
    """A micro-batch's arrays as tensors on `device`; its segment spans as a list of tuples."""
    # torch.tensor copies: arrays from the object store are read-only views of shared memory.
    t: dict[str, Any] = {
        k: torch.tensor(getattr(mb, k), device=device)
        for k in ("input_ids", "attention_mask", "prompt_lens", "completion_mask", "logprobs_old", "advantages")
    }
    segments: list[SegmentSpan] | None = None
    if mb.segments is not None:
        segments = [(int(a), int(b), int(c)) for a, b, c in mb.segments]
    t["segments"] = segments
    return t


class _PolicyLogprobs(torch.nn.Module):
    """The policy as DeepSpeed holds it: `lm` is the Hugging Face model, and forward returns
    completion logprobs (and entropy) without materialising full logits (learner/logprobs.py)."""

    def __init__(self, lm: torch.nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(
        self,
        t: dict[str, Any],
        *,
        completion_len: int,
        temperature: float,
        chunk_tokens: int,
        with_entropy: bool,
        min_segments: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return logprobs_of(
            self.lm,
            t,
            completion_len=completion_len,
            temperature=temperature,
            chunk_tokens=chunk_tokens,
            with_entropy=with_entropy,
            min_segments=min_segments,
        )


def _local_numel(p: torch.nn.Parameter) -> int:
    """Elements this rank stores (ZeRO-3 keeps a shard in ds_tensor and an empty .data)."""
    return int(p.ds_tensor.numel()) if hasattr(p, "ds_tensor") else p.numel()


class LearnerWorker:
    def __init__(
        self,
        cfg: LearnerConfig,
        run: Runtime,
        *,
        temperature: float,
        max_new_tokens: int,
        rank: int,
        world_size: int,
        micro_batches: int,
        loss: PolicyLoss,
    ) -> None:
        self.cfg, self.temperature, self.rank, self.world_size = cfg, temperature, rank, world_size
        self.max_new_tokens = max_new_tokens  # rollout.max_new_tokens: Dr. GRPO's constant normaliser
        self.dtype, self.seed, self.device = run.dtype, run.seed, run.device
        self.model_path = hub.on_this_node(run.model_path)  # a hub snapshot absent here: this node's copy
        self.chat_template = run.chat_template  # written into the export (save_hf)
        self.timeout_s = run.timeout_s  # of the rendezvous and of every collective (trainer.phase_timeout_s)
        self.micro_batches, self.verbose = micro_batches, run.verbose
        devices.require(run.device, f"learner rank {rank}")
        devices.pin_cpus(cfg.cpu_affinity, "learner.cpu_affinity")  # before torch starts its threads
        self.loss = loss  # learner.loss, resolved by the driver (learner/objectives/losses.py)
        self.updates = 0  # optimizer steps applied = the policy_version of these weights
        self._plan: list[Bucket] | None = None
        self._transport = TransportCache()  # rank 0's transports (a collective one holds its group)
        self._listen: Any = None  # the socket of the DeepSpeed rendezvous store this rank hosts

    # -- set-up ---------------------------------------------------------------------------

    def reserve_port(self) -> tuple[str, int]:
        """Open a listening socket on this node for the learner group's rendezvous store (rank
        0 hosts it). Returns (host, port)."""
        self._listen = listen_socket(node_host())
        return self._listen.getsockname()[0], self._listen.getsockname()[1]

    def setup(self, master_addr: str, master_port: int) -> dict[str, Any]:
        """Join DeepSpeed's group and build the engine (and the reference model when kl_coef > 0).
        Returns what this rank holds: parameters in the model and stored here (ZeRO-3 shards)."""
        os.environ.update(
            MASTER_ADDR=master_addr,
            MASTER_PORT=str(master_port),
            RANK=str(self.rank),
            WORLD_SIZE=str(self.world_size),
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE="1",
            DS_ACCELERATOR=devices.ds_accelerator(self.device),
        )
        # DeepSpeed and transformers: in the learner's processes only
        import deepspeed
        from transformers import AutoModelForCausalLM

        quiet_deepspeed(self.verbose)
        backend = devices.collective_backend(self.device)
        # Our own store (listening on master_addr only), then DeepSpeed adopts the initialised group.
        listen, self._listen = self._listen, None
        store = make_store(master_addr, master_port, self.world_size, self.timeout_s, listen)
        # The timeout bounds every collective of the group: a dead peer ends the step with an
        # error instead of a hang.
        torch.distributed.init_process_group(
            backend,
            store=store,
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(seconds=self.timeout_s),
        )
        with quiet_stdout(self.verbose):
            deepspeed.init_distributed(dist_backend=backend)
        torch.manual_seed(self.seed)
        config = ds_config(
            self.cfg, dtype=self.dtype, micro_batches=self.micro_batches, world_size=self.world_size, device=self.device
        )
        self._hf_ds_config = self._zero3_init_context(config)  # must outlive from_pretrained
        model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
        if self.cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.shared_prefix = self._shared_prefix_supported(model)
        self.engine, *_ = deepspeed.initialize(
            model=_PolicyLogprobs(model), model_parameters=model.parameters(), config=config
        )
        self.ref = self._load_reference(config) if self.cfg.kl_coef > 0 else None
        ref_params = list(self.ref.parameters()) if self.ref is not None else []
        return {
            "rank": self.rank,
            "pid": os.getpid(),
            "params": sum(int(getattr(p, "ds_numel", p.numel())) for p in model.parameters()),
            "params_local": sum(_local_numel(p) for p in model.parameters()),
            "reference": self.ref is not None,
            "reference_params_local": sum(_local_numel(p) for p in ref_params),
            "shared_prefix": self.shared_prefix,
        }

    def _shared_prefix_supported(self, model: torch.nn.Module) -> bool:
        """learner.shared_prefix where the model supports it; else one log line and per sample."""
        if not self.cfg.shared_prefix:
            return False
        reason = unsupported_reason(model)
        if reason is not None and self.rank == 0:
            log.warning("learner.shared_prefix: falling back to per-sample forwards: %s", reason)
        return reason is None

    def _zero3_init_context(self, config: dict[str, Any]) -> Any:
        if self.cfg.zero_stage != 3:
            return None
        # transformers partitions weights at load time while this object is alive (ZeRO-3 init).
        from transformers.integrations import HfDeepSpeedConfig

        return HfDeepSpeedConfig(config)

    def _load_reference(self, config: dict[str, Any]) -> torch.nn.Module:
        """The frozen initial policy for the KL term (loaded only when kl_coef > 0)."""
        # DeepSpeed and transformers: in the learner's processes only
        import deepspeed
        from transformers import AutoModelForCausalLM

        ref = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32).eval()
        ref.requires_grad_(False)
        if self.cfg.zero_stage != 3:  # a full copy on this rank's device, in the policy's dtype
            return ref.to(
                device=self.engine.device, dtype=torch.bfloat16 if self.dtype == "bfloat16" else torch.float32
            )
        # ZeRO-3: partition the reference too (an engine without optimizer), or each rank would
        # hold a full copy. It is only ever run under no_grad, so calling its module directly
        # (ZeRO-3's gather hooks live on the submodules) is enough.
        ref_config = {k: v for k, v in config.items() if k not in ("optimizer", "gradient_clipping")}
        return deepspeed.initialize(model=ref, config=ref_config)[0].module

    @property
    def _lm(self) -> torch.nn.Module:
        """The Hugging Face model inside the engine (parameter names as the engines expect them)."""
        return self.engine.module.lm

    # -- training -------------------------------------------------------------------------

    def _tensors(self, mb: MicroBatch) -> dict[str, Any]:
        if mb.segments is not None and not self.shared_prefix:
            raise ValueError("a shared-prefix micro-batch for a rank without learner.shared_prefix")
        return micro_batch_tensors(mb, self.engine.device)

    def _rank_max(self, value: int) -> int:
        """The largest `value` among the ranks under multi-rank ZeRO-3, else `value`. Every module
        call gathers its shards there (a collective), so the ranks must agree on call counts."""
        if self.cfg.zero_stage != 3 or self.world_size == 1:
            return value
        w = torch.tensor([value], device=self.engine.device)
        torch.distributed.all_reduce(w, op=torch.distributed.ReduceOp.MAX)
        return int(w.item())

    def _calls(self, t: dict[str, Any]) -> tuple[int, int]:
        """Completion positions to project (every LM-head chunk is a call: all ranks use the
        widest micro-batch's width, the extra positions masked) and segments to run (two
        decoder calls each: ranks with fewer run empty ones)."""
        width = self._rank_max(t["completion_mask"].shape[1])
        return width, self._rank_max(len(t["segments"])) if t["segments"] is not None else 0

    def _policy_logprobs(
        self, t: dict[str, Any], temperature: float, with_entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """[b, T] logprobs and entropy of the micro-batch's completion tokens under the policy."""
        completion_len, min_segments = self._calls(t)
        lp, ent = self.engine(
            t,
            completion_len=completion_len,
            min_segments=min_segments,
            temperature=temperature,
            chunk_tokens=self.cfg.logprob_chunk_tokens,
            with_entropy=with_entropy,
        )
        n = t["completion_mask"].shape[1]
        return lp[:, :n], ent[:, :n]

    @torch.no_grad()
    def _ref_logprobs(self, t: dict[str, Any], temperature: float) -> torch.Tensor:
        assert self.ref is not None
        completion_len, min_segments = self._calls(t)
        lp, _ = logprobs_of(
            self.ref,
            t,
            completion_len=completion_len,
            min_segments=min_segments,
            temperature=temperature,
            chunk_tokens=self.cfg.logprob_chunk_tokens,
        )
        return lp[:, : t["completion_mask"].shape[1]]

    def _set_lr(self, lr: float) -> None:
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr

    def _backward(self, loss: torch.Tensor) -> None:
        # x world_size undoes the data-parallel averaging; scale_wrt_gas=False skips the division
        # by the nominal accumulation steps: the summed gradient is that of the step's loss.
        self.engine.backward(loss * self.world_size, scale_wrt_gas=False)

    def train_step(self, batch: RankBatch) -> dict[str, float]:
        """One GRPO update over this rank's share; returns sums that the group adds up."""
        self._set_lr(lr_at(self.cfg, self.updates))
        self.engine.train()
        sums: dict[str, float] = {
            "loss": 0.0,
            "tokens": 0.0,
            "clip_frac": 0.0,
            "approx_kl_old": 0.0,
            "ratio_mean": 0.0,
            "kl_ref": 0.0,
            "entropy": 0.0,
            "logprob_diff_sum": 0.0,
            "logprob_diff_tokens": 0.0,
            "logprob_diff_max": 0.0,
        }
        for mb in batch.micro_batches:
            t = self._tensors(mb)
            logprobs, entropy = self._policy_logprobs(t, self.temperature, with_entropy=True)
            # One update per step: these logprobs are the learner's before it (learner/objectives/mismatch.py).
            diff_sum, diff_n, diff_max = mismatch.logprob_diff(logprobs, t["logprobs_old"], t["completion_mask"])
            sums["logprob_diff_sum"] += float(diff_sum)
            sums["logprob_diff_tokens"] += float(diff_n)
            sums["logprob_diff_max"] = max(sums["logprob_diff_max"], float(diff_max))
            ref = self._ref_logprobs(t, self.temperature) if self.ref is not None else None
            inputs = loss_inputs(
                self.cfg,
                logprobs,
                t,
                ref,
                num_seqs=batch.num_seqs,
                num_tokens=batch.num_tokens,
                max_new_tokens=self.max_new_tokens,
            )
            loss, stats = self.loss(inputs, self.cfg)
            self._backward(loss)
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

    def probe_step(self, batch: RankBatch) -> tuple[dict[str, float], np.ndarray | None]:
        """`train_step`, also returning the full gradient the optimizer receives (rank 0; None
        elsewhere): after DeepSpeed's reduction over ranks and micro-batches, before clipping.
        For tests and debugging: it gathers every parameter's gradient onto every rank."""
        # DeepSpeed: in the learner's processes only
        from deepspeed.utils import safe_get_full_grad

        optimizer, grads = self.engine.optimizer, list[torch.Tensor]()

        def gather_then_step(*args: Any, **kwargs: Any) -> Any:
            # engine.step() calls this after its boundary reduction (all stages) and before any
            # update: the moment DeepSpeed documents safe_get_full_grad for.
            grads.extend(safe_get_full_grad(p).detach().float().reshape(-1).cpu() for _, p in self._named_params())
            return type(optimizer).step(optimizer, *args, **kwargs)

        optimizer.step = gather_then_step  # an instance attribute shadows the class's step for one call
        try:
            stats = self.train_step(batch)
        finally:
            del optimizer.step
        return stats, (torch.cat(grads).numpy() if self.rank == 0 else None)

    def sft_step(self, batch: RankBatch) -> dict[str, float]:
        """One supervised step on oracle answers: mean negative logprob per completion token."""
        self._set_lr(self.cfg.sft_lr)
        self.engine.train()
        total = 0.0
        for mb in batch.micro_batches:
            t = self._tensors(mb)
            logprobs, _ = self._policy_logprobs(t, 1.0)
            loss = -(logprobs * t["completion_mask"]).sum() / batch.num_tokens
            self._backward(loss)
            total += loss.item()
        self.engine.step()
        return {"loss": total, "grad_norm": float(self.engine.get_global_grad_norm() or 0.0)}

    def reset_optimizer(self) -> None:
        """Forget the optimizer's moments (between the SFT warm start and RL): Adam's second
        moments from SFT, whose gradients are far larger than the policy gradient's, would
        otherwise shrink the first RL updates for hundreds of steps. The torch optimizer
        inside DeepSpeed's ZeRO wrapper re-creates its state lazily, as at start-up."""
        self.engine.optimizer.optimizer.state.clear()

    @torch.no_grad()
    def sequence_logprobs(self, token_ids: list[int], temperature: float = 1.0) -> list[float]:
        """Logprob of each token after the first given its prefix (compared with the engine's)."""
        self.engine.eval()
        ids = torch.tensor([token_ids], device=self.engine.device)
        lp, _ = completion_logprobs(
            self._lm,
            ids,
            torch.ones_like(ids),
            torch.tensor([1], device=ids.device),
            len(token_ids) - 1,
            temperature=temperature,
        )
        return lp[0].float().cpu().tolist()

    # -- state (checkpoints) --------------------------------------------------------------

    def save_state(self, state_dir: str) -> None:
        """Write this rank's part of the learner state under `state_dir` and nowhere else:
        DeepSpeed's checkpoint (weights, optimizer moments, its step counters; each rank writes
        its own ZeRO shards, so on a cluster `state_dir` is shared storage), this rank's RNG
        states, and (rank 0) the update count and the layout the shards need to load."""
        out = Path(state_dir)
        self.engine.save_checkpoint(str(out), tag=_STATE_TAG, save_latest=False)
        (out / _STATE_TAG / f"rng_rank{self.rank}.json").write_text(json.dumps(rng_states()))
        if self.rank == 0:
            meta = {
                "updates": self.updates,
                "num_ranks": self.world_size,
                "zero_stage": self.cfg.zero_stage,
                "dtype": self.dtype,
            }
            (out / _STATE_META).write_text(json.dumps(meta, indent=1) + "\n")
        torch.distributed.barrier()  # the state is complete when every rank returns

    def load_state(self, state_dir: str) -> int:
        """Restore what save_state wrote (same num_ranks and zero_stage); returns the update count."""
        path = Path(state_dir)
        meta_file = path / _STATE_META
        if not meta_file.is_file():
            raise FileNotFoundError(f"{meta_file}: not a learner state directory (save_state writes it)")
        meta = json.loads(meta_file.read_text())
        for field, now in (("num_ranks", self.world_size), ("zero_stage", self.cfg.zero_stage)):
            if meta[field] != now:
                raise ValueError(
                    f"{path}: saved with learner.{field}={meta[field]}, this group has {now}; "
                    "ZeRO shards load only into the layout that wrote them"
                )
        loaded, _ = self.engine.load_checkpoint(
            str(path), tag=_STATE_TAG, load_optimizer_states=True, load_lr_scheduler_states=False
        )
        if loaded is None:
            raise FileNotFoundError(f"{path / _STATE_TAG}: DeepSpeed found no checkpoint to load")
        set_rng_states(json.loads((path / _STATE_TAG / f"rng_rank{self.rank}.json").read_text()))
        self.updates = int(meta["updates"])
        return self.updates

    # -- weights out ----------------------------------------------------------------------

    def _named_params(self) -> list[tuple[str, torch.nn.Parameter]]:
        # named_parameters() lists a tied weight once (under its first name), so a tied
        # lm_head is not sent: the engine re-ties it after loading.
        return list(self._lm.named_parameters())

    def set_weight_plan(self, bucket_bytes: int, dtype: str) -> list[Bucket]:
        """Fix the bucket plan of weight sync (every rank: all take part in ZeRO-3 gathers)."""
        meta = [(n, tuple(getattr(p, "ds_shape", p.shape)), dtype) for n, p in self._named_params()]
        self._plan = plan_buckets(meta, bucket_bytes)
        return self._plan

    def _gathered(self, params: list[torch.nn.Parameter]) -> Any:
        if self.cfg.zero_stage != 3:
            return nullcontext()
        # DeepSpeed: in the learner's processes only
        import deepspeed

        return deepspeed.zero.GatheredParameters(params, modifier_rank=None)

    def _packed_buckets(self, plan: list[Bucket]) -> Iterator[torch.Tensor]:
        """Gather (ZeRO-3, all ranks take part) and pack one bucket at a time; only rank 0 yields."""
        params = dict(self._named_params())
        for bucket in plan:
            tensors = [params[s.name] for s in bucket.slots]
            with self._gathered(tensors):
                if self.rank == 0:
                    yield pack(bucket, [p.data for p in tensors])

    def weights_prepare(self, transport: type[WeightTransport], world_size: int) -> Any:
        """Rank 0: open the group the engines join (rendezvous transports); returns its spec."""
        return self._transport(transport).prepare(world_size, devices.collective_backend(self.device), self.timeout_s)

    def weights_join(self, transport: type[WeightTransport], spec: Any) -> None:
        """Rank 0 joins the group as its sender (rank 0 of the group)."""
        self._transport(transport).join(spec, 0)

    def weights_send(self, transport: type[WeightTransport]) -> Shipment | None:
        """Send the current weights with `transport`: every rank gathers (ZeRO-3), rank 0
        sends and returns the shipment (the version of these weights and the payload)."""
        assert self._plan is not None, "set_weight_plan first"
        flats = self._packed_buckets(self._plan)
        if self.rank != 0:
            for _ in flats:  # take part in the ZeRO-3 gathers
                pass
            return None
        return Shipment(self.updates, self._transport(transport).send(flats))

    def param_digest(self) -> str:
        """Hash of the full parameters (rank 0), to prove an update changed them."""
        h = hashlib.sha256()
        for _, p in self._named_params():
            with self._gathered([p]):
                h.update(p.data.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()

    def save_hf(self, out_dir: str) -> str | None:
        """Hugging Face export of the current policy (rank 0 writes; all ranks gather).

        One parameter is gathered at a time and copied to rank 0's host memory, so no GPU ever
        holds the whole model (under ZeRO-3 at 70B, 141 GB of bf16 would not fit in one)."""
        state: dict[str, torch.Tensor] = {}
        for name, p in self._named_params():
            with self._gathered([p]):
                if self.rank == 0:
                    state[name] = p.data.detach().to("cpu", copy=True)
        if self.rank != 0:
            return None
        # Persistent buffers too (none in Llama; other architectures keep some). A tied
        # lm_head is left out, as in any checkpoint: loading re-ties it.
        persistent = self._lm.state_dict().keys()
        state.update((n, b.detach().cpu()) for n, b in self._lm.named_buffers() if n in persistent)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self._lm.save_pretrained(out, state_dict=state)
        models.copy_tokenizer(self.model_path, out, self.chat_template)
        return str(out)
