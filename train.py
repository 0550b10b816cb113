"""SWE-RL on Ray: the driver (Hydra main). `python train.py [overrides]`.

One step is a pipeline of named, timed phases:
    data -> generate -> reward -> advantages -> train -> sync -> checkpoint -> log
Each phase awaits every ObjectRef it creates, with a timeout (trainer.phase_timeout_s), so a
failed or hung actor surfaces in the phase that used it, by name.

Modes: `trainer.mode=sync` is the paper's on-policy loop. `trainer.mode=async` keeps the
rollout actors generating the next `trainer.max_staleness` steps' prompts while the learner
trains; a group generated more than max_staleness updates ago is dropped (counted) and
regenerated, and the loss corrects the rest with the engine's own behaviour logprobs
(importance ratio, clipped). Where the run departs from the paper it is a config choice
documented in conf/config.py (e.g. rollout.oracle_samples_per_group, learner.kl_coef).
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import ray
import torch
from omegaconf import DictConfig, OmegaConf
from ray.exceptions import GetTimeoutError, RayActorError

from actors import weight_sync
from actors.cluster import ResourceError, check_fits, init_ray
from actors.control import FleetControl
from actors.fleet import PhaseTimeout, RolloutFleet
from actors.reward_pool import RewardInstance, RewardPool, ScoreJob
from actors.rollout import Completion, GenerationRequest, GenerationResult
from actors.telemetry import Telemetry
from conf import config
from data.loader import InstanceLoader, PromptItem
from data.schema import files_to_dict
from learner import grpo, models
from learner.batch import TrainSample, shard
from learner.checkpoint import CheckpointStore, ResumeError, check_compatible, rng_states, set_rng_states
from learner.group import LearnerGroup, PlacementError, combine_stats
from reward import OracleAnswerError, oracle_answer

config.register()


class PhaseTimer:
    """Wall time per named phase of one step; a Ray timeout inside a phase names the phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        except GetTimeoutError as exc:
            raise PhaseTimeout(f"phase {name}: a remote call did not answer in time ({exc})") from exc
        finally:
            self.seconds[f"{name}_s"] = round(time.perf_counter() - start, 3)


def resource_demands(cfg: config.TrainConfig) -> list[tuple[str, int, dict[str, float]]]:
    """What the config asks of the cluster: (what, how many, resources of one)."""
    return [
        ("rollout actor (rollout.num_cpus/num_gpus)", cfg.rollout.num_actors,
         {"CPU": cfg.rollout.num_cpus, "GPU": cfg.rollout.num_gpus}),
        ("reward actor (reward.num_cpus)", cfg.reward.num_workers, {"CPU": cfg.reward.num_cpus}),
        ("learner rank (learner.num_cpus_per_rank/num_gpus_per_rank)", cfg.learner.num_ranks,
         {"CPU": cfg.learner.num_cpus_per_rank, "GPU": cfg.learner.num_gpus_per_rank}),
    ]


def request_id(step: int, slot: int, instance_id: str) -> str:
    """The id of a step's `slot`-th group. The slot keeps ids unique when an instance occurs
    twice in one step (a data set smaller than prompts_per_step, or an epoch boundary)."""
    return f"{step}/{slot}/{instance_id}"


def request_seed(seed: int, request: str) -> int:
    """Per-request sampling seed: a group is reproducible from (seed, its request id)."""
    return zlib.crc32(f"{seed}/{request}".encode()) & 0x7FFFFFFF


class Trainer:
    def __init__(self, cfg: config.TrainConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.step, self.policy_version = 0, 0
        self.checkpoints = CheckpointStore(self.run_dir)
        self.resume_from = self.checkpoints.latest()
        if self.resume_from is not None:  # refuse an incompatible config before starting anything
            check_compatible(self.resume_from.state["config"], asdict(cfg))
        init_ray(cfg.ray.address, num_cpus=cfg.ray.num_cpus, include_dashboard=cfg.ray.include_dashboard)
        self.model_path = models.resolve(cfg.model)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.loader = InstanceLoader(cfg.data.path, self.tokenizer, seed=cfg.seed, heldout_fraction=cfg.data.heldout_fraction,
                                     max_prompt_tokens=cfg.data.max_prompt_tokens)
        timeout = cfg.trainer.phase_timeout_s
        check_fits(resource_demands(cfg), [n["Resources"] for n in ray.nodes() if n["Alive"]])
        print(f"[setup] model {self.model_path}; starting {cfg.rollout.num_actors} rollout actor(s), "
              f"{cfg.reward.num_workers} reward actor(s), {cfg.learner.num_ranks} learner rank(s)", flush=True)
        # The learner's placement group first: a cluster that cannot hold it fails fast, by name.
        self.learner = LearnerGroup(cfg.learner, model_path=self.model_path, dtype=cfg.model.dtype,
                                    temperature=cfg.rollout.temperature, seed=cfg.seed, timeout_s=timeout,
                                    micro_batches=max(1, cfg.trainer.prompts_per_step * cfg.group_size
                                                      // cfg.learner.num_ranks // cfg.learner.micro_batch_size))
        self.fleet = RolloutFleet(cfg.rollout, model_path=self.model_path, dtype=cfg.model.dtype, seed=cfg.seed,
                                  timeout_s=timeout, weights=self._weights_snapshot)
        self.rewards = RewardPool(cfg.reward)
        self.fleet.wait_ready()
        self.plan = self.learner.weight_plan(cfg.trainer.sync_bucket_mb << 20, cfg.model.dtype)
        self.sync_bytes = sum(b.numel for b in self.plan) * (2 if cfg.model.dtype == "bfloat16" else 4)
        self.pending: dict[int, tuple[list[PromptItem], dict[str, Any]]] = {}  # async: step -> (items, loader state before)
        self.control = FleetControl.start(self.run_dir.name, cfg.rollout.num_actors)
        self.telemetry = Telemetry(self.run_dir.name)
        self._resume()

    # -- resume, weights ----------------------------------------------------------------------

    def _resume(self) -> None:
        ckpt = self.resume_from
        logged = self._logged_steps()
        # Steps logged after the last checkpoint (checkpoint_every > 1) were lost with the driver
        # and run again; their new lines are marked rerun, and a step's last line is the one that counts.
        self.rerun_steps = {s for s in logged if s > (ckpt.step if ckpt else 0)}
        if self.rerun_steps:
            print(f"[resume] steps {min(self.rerun_steps)}-{max(self.rerun_steps)} were logged after the last "
                  "checkpoint; they run again and their metrics lines are marked rerun", flush=True)
        if ckpt is None:
            return
        print(f"[resume] from {ckpt.path} (step {ckpt.step}, policy_version {ckpt.state['policy_version']})", flush=True)
        self.learner.load_state(str(ckpt.path / "learner"))
        self.loader.load_state_dict(ckpt.state["loader"])
        set_rng_states(ckpt.state["rng"])
        self.step, self.policy_version = ckpt.step, int(ckpt.state["policy_version"])
        # Exactly-once metrics: a driver killed between the checkpoint and its log line.
        if ckpt.state.get("metrics") and ckpt.step not in logged:
            self._append_metrics(ckpt.state["metrics"])

    def _weights_snapshot(self) -> tuple[list[weight_sync.Bucket], list[Any], int]:
        """The learner's current weights as object-store arrays (new or restarted actors)."""
        return self.plan, self.learner.packed_arrays(self.plan), self.policy_version

    def sync_weights(self) -> list[dict[str, Any]]:
        """Broadcast the learner's weights to every live engine (re-forming the group first when
        actors were added, removed or restarted); each engine reports the new version."""
        timeout = self.cfg.trainer.phase_timeout_s
        if self.fleet.needs_group():
            host, port = ray.get(self.learner.workers[0].reserve_port.remote("sync"), timeout=timeout)
            per_actor = self.fleet.engine_ranks_per_actor
            spec = weight_sync.SyncGroupSpec(host=host, port=port, world_size=1 + per_actor * len(self.fleet.live),
                                             backend="nccl" if self.cfg.learner.num_gpus_per_rank > 0 else "gloo",
                                             timeout_s=timeout)
            refs = self.learner.sync_join(spec, self.plan) + self.fleet.join_group(spec, self.plan)
            self._await_pumping(refs, "sync (group formation)")
        send, receive = self.learner.sync_send(), self.fleet.receive_weights(self.policy_version)
        reports = self._await_pumping(send + receive, "sync")[len(send):]
        if any(r["policy_version"] != self.policy_version for r in reports):
            raise RuntimeError(f"weight sync: engines report {[r['policy_version'] for r in reports]}, "
                               f"expected {self.policy_version}")
        self.fleet.mark_version(self.policy_version)
        return reports

    def _await_pumping(self, refs: list[Any], phase: str) -> list[Any]:
        """Wait for refs; meanwhile collect finished generation (but start none: a chunk sent
        now would queue before the engine's part of a collective and stall it)."""
        deadline = time.monotonic() + self.cfg.trainer.phase_timeout_s
        pending = list(refs)
        while pending:
            if time.monotonic() > deadline:
                raise PhaseTimeout(f"phase {phase}: {len(pending)} call(s) did not finish within "
                                   f"{self.cfg.trainer.phase_timeout_s:.0f} s")
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            self.fleet.collect()
        return ray.get(refs)

    # -- the run ------------------------------------------------------------------------------

    def fit(self) -> None:
        if self.step == 0 and self.cfg.learner.sft_steps > 0:
            self.warm_start()
        self.sync_weights()  # engines start from the learner's weights (fresh, SFT'd or resumed)
        while self.step < self.cfg.trainer.steps:
            self._apply_scaling()
            metrics = self.train_step()
            self.step += 1
            if self.step in self.rerun_steps:
                metrics["rerun"] = True
            if self.step % self.cfg.trainer.checkpoint_every == 0 or self.step == self.cfg.trainer.steps:
                with _timed(metrics, "checkpoint_s"):
                    self.save_checkpoint(metrics)
            self._append_metrics(metrics)
            self.telemetry.record(metrics)
            self._print(metrics)
        print(f"[done] {self.step} steps; Hugging Face export in {self.run_dir / 'hf'}", flush=True)
        try:
            from learner.plot import plot_run

            print(f"[done] learning curves in {plot_run(self.run_dir)}", flush=True)
        except ImportError:  # matplotlib comes with the `test` extra; the run does not need it
            print("[done] no plot: pip install matplotlib for reward_curve.png", flush=True)

    def _prompts_for(self, step: int) -> tuple[list[PromptItem], dict[str, Any]]:
        """Step `step`'s prompts (fetched once; the loader state before them goes into the checkpoint)."""
        if step not in self.pending:
            before = self.loader.state_dict()
            items = self.loader.next_batch(self.cfg.trainer.prompts_per_step)
            self.pending[step] = (items, before)
            self.fleet.submit([self._request(step, slot, it) for slot, it in enumerate(items)])
        return self.pending[step]

    def _request(self, step: int, slot: int, item: PromptItem) -> GenerationRequest:
        rid = request_id(step, slot, item.instance_id)
        return GenerationRequest(rid, item.prompt_ids, self.cfg.group_size, request_seed(self.cfg.seed, rid))

    def train_step(self) -> dict[str, Any]:
        cfg, timer, started = self.cfg, PhaseTimer(), time.perf_counter()
        lookahead = cfg.trainer.max_staleness if cfg.trainer.mode == "async" else 0
        with timer("data"):
            for ahead in range(lookahead + 1):
                self._prompts_for(self.step + ahead)
            items, _ = self.pending[self.step]
        with timer("generate"):
            results, dropped = self._collect_fresh(items)
            groups = [self._with_oracle(it, res) for it, res in zip(items, results, strict=True)]
        with timer("reward"):
            scored = self._score(items, groups)
            rewards = torch.tensor([s.result.reward for s in scored], dtype=torch.float64)
        with timer("advantages"):
            adv = grpo.advantages(rewards, cfg.group_size, eps=cfg.learner.adv_eps, scale_rewards=cfg.learner.scale_rewards)
            flat = [(it, c) for it, group in zip(items, groups, strict=True) for c in group]
            # Oracle samples carry no engine logprobs (None): the learner's own stand in.
            samples = [TrainSample(it.prompt_ids, c.token_ids, c.logprobs if c.finish_reason != "oracle" else None, float(a))
                       for (it, c), a in zip(flat, adv.tolist(), strict=True)]
        digest = self.learner.param_digest() if cfg.trainer.verify_sync else ""
        with timer("train"):
            batches, pad_stats = shard(samples, num_ranks=cfg.learner.num_ranks, micro_batch_size=cfg.learner.micro_batch_size,
                                       pad_id=self.tokenizer.pad_token_id, drop_zero_advantage=cfg.learner.kl_coef == 0)
            refs = [w.train_step.remote(b) for w, b in zip(self.learner.workers, batches, strict=True)]
            stats = combine_stats(self._await_generating(refs, "train")) | pad_stats
        self.policy_version += 1
        if cfg.trainer.verify_sync:
            stats["params_changed"] = float(digest != self.learner.param_digest())
            probe = samples[0].prompt_ids + samples[0].completion_ids
            stats["sync_probe_diff_before"] = self._probe_diff(probe)
        with timer("sync"):
            self.sync_weights()
        if cfg.trainer.verify_sync:
            stats["sync_probe_diff_after"] = self._probe_diff(probe)
        self._log_rollouts(items, results, groups, scored)
        del self.pending[self.step]
        metrics = self._metrics(groups, results, rewards, samples, stats, timer)
        metrics.update(step_s=round(time.perf_counter() - started, 3), stale_dropped=dropped)
        return metrics

    def _collect_fresh(self, items: list[PromptItem]) -> tuple[list[GenerationResult], int]:
        """Wait for the step's groups; drop and regenerate those more than max_staleness
        versions old (possible in async mode only). Returns (results, groups dropped)."""
        ids = [request_id(self.step, slot, it.instance_id) for slot, it in enumerate(items)]
        slot_of = {rid: slot for slot, rid in enumerate(ids)}
        results = {r.request_id: r for r in self.fleet.wait_for(ids)}
        dropped = 0
        while stale := [i for i in ids if self.policy_version - results[i].policy_version > self.cfg.trainer.max_staleness]:
            dropped += len(stale)
            self.fleet.submit([self._request(self.step, slot_of[i], items[slot_of[i]]) for i in stale])
            results.update({r.request_id: r for r in self.fleet.wait_for(stale)})
        return [results[i] for i in ids], dropped

    def _await_generating(self, refs: list[Any], phase: str) -> list[Any]:
        """Wait for refs while the fleet keeps generating queued prompts (async overlap)."""
        deadline = time.monotonic() + self.cfg.trainer.phase_timeout_s
        pending = list(refs)
        while pending:
            if time.monotonic() > deadline:
                raise PhaseTimeout(f"phase {phase}: learner group did not finish within {self.cfg.trainer.phase_timeout_s:.0f} s")
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
            self.fleet.pump()
        return ray.get(refs)

    # -- phases' helpers ----------------------------------------------------------------------

    def _probe_diff(self, token_ids: list[int]) -> float:
        """Largest |engine - learner| logprob over a token sequence (temperature 1)."""
        engine = np.array(self.fleet.prompt_logprobs(token_ids))
        learner = np.array(self.learner.sequence_logprobs(token_ids))
        return float(np.abs(engine - learner).max())

    def _oracle_ids(self, item: PromptItem) -> tuple[str, list[int]] | None:
        try:
            text = oracle_answer(files_to_dict(item.instance["code_context"]),
                                 files_to_dict(item.instance["oracle_new_content"]))
        except OracleAnswerError as exc:  # the format cannot express this change
            print(f"[oracle] {item.instance_id}: no oracle answer ({exc})", flush=True)
            return None
        return text, self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]

    def _with_oracle(self, item: PromptItem, result: GenerationResult) -> list[Completion]:
        """The group, its last `oracle_samples_per_group` samples replaced by the oracle answer."""
        k = self.cfg.rollout.oracle_samples_per_group
        oracle = self._oracle_ids(item) if k else None
        if oracle is None:
            return result.completions
        return result.completions[:-k] + [Completion(oracle[1], [], oracle[0], "oracle")] * k

    def _score(self, items: list[PromptItem], groups: list[list[Completion]]) -> list[Any]:
        instances = {it.instance_id: RewardInstance(files_to_dict(it.instance["code_context"]),
                                                    files_to_dict(it.instance["oracle_new_content"])) for it in items}
        jobs = [ScoreJob(f"{request_id(self.step, slot, it.instance_id)}/{j}", it.instance_id, c.text)
                for slot, (it, group) in enumerate(zip(items, groups, strict=True)) for j, c in enumerate(group)]
        return self.rewards.score(jobs, instances)

    def warm_start(self) -> None:
        """learner.sft_steps supervised steps on the oracle answers, before RL (a separate
        loader over the same data, so the RL data order is untouched)."""
        cfg = self.cfg
        sft_loader = InstanceLoader(cfg.data.path, self.tokenizer, seed=cfg.seed + 1,
                                    heldout_fraction=cfg.data.heldout_fraction, max_prompt_tokens=cfg.data.max_prompt_tokens)
        log = self.run_dir / "sft_metrics.jsonl"
        for sft_step in range(1, cfg.learner.sft_steps + 1):
            start = time.perf_counter()
            samples = []
            while len(samples) < cfg.learner.sft_batch_size:
                (item,) = sft_loader.next_batch(1)
                oracle = self._oracle_ids(item)
                if oracle is not None:
                    samples.append(TrainSample(item.prompt_ids, oracle[1], None, 1.0))
            batches, _ = shard(samples, num_ranks=cfg.learner.num_ranks, micro_batch_size=cfg.learner.micro_batch_size,
                               pad_id=self.tokenizer.pad_token_id, drop_zero_advantage=False)
            stats = self.learner.sft_step(batches) | {"sft_step": sft_step, "sft_s": round(time.perf_counter() - start, 3)}
            with open(log, "a") as f:
                f.write(json.dumps(stats) + "\n")
            if sft_step % 10 == 0 or sft_step == cfg.learner.sft_steps:
                print(f"[sft {sft_step}/{cfg.learner.sft_steps}] loss {stats['sft_loss']:.4f} ({stats['sft_s']:.1f}s)", flush=True)
        self.learner.reset_optimizer()  # RL starts with fresh moments (see LearnerWorker.reset_optimizer)

    def _apply_scaling(self) -> None:
        """Add or remove rollout actors to match the count asked through FleetControl."""
        want = self.control.desired()
        while len(self.fleet.live) < want:
            print(f"[fleet] adding a rollout actor ({len(self.fleet.live)} -> {want})", flush=True)
            self.fleet.add_actor()
        while len(self.fleet.live) > max(1, want):
            print(f"[fleet] removing {self.fleet.remove_actor()} ({len(self.fleet.live) + 1} -> {want})", flush=True)
        self.control.report(len(self.fleet.live), self.step)

    # -- checkpoints and logs -----------------------------------------------------------------

    def save_checkpoint(self, metrics: dict[str, Any]) -> None:
        loader_state = self.pending[self.step][1] if self.step in self.pending else self.loader.state_dict()
        state = {"step": self.step, "policy_version": self.policy_version, "loader": loader_state,
                 "rng": rng_states(), "metrics": metrics, "config": asdict(self.cfg)}

        def write_learner(tmp: Path) -> None:
            self.learner.save_state(str(tmp / "learner"))
            self.learner.save_hf(str(tmp / "hf"))

        final = self.checkpoints.save(self.step, state, write_learner)
        link = self.run_dir / "hf"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(final.relative_to(self.run_dir) / "hf")

    def _logged_steps(self) -> set[int]:
        path = self.run_dir / "metrics.jsonl"
        if not path.is_file():
            return set()
        return {json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()}

    def _append_metrics(self, metrics: dict[str, Any]) -> None:
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")

    def _log_rollouts(self, items: list[PromptItem], results: list[GenerationResult], groups: list[list[Completion]],
                      scored: list[Any]) -> None:
        every = self.cfg.trainer.rollout_log_every
        if every <= 0 or (self.step + 1) % every:
            return
        out = self.run_dir / "rollouts" / f"step_{self.step + 1:06d}.jsonl"
        out.parent.mkdir(exist_ok=True)
        rows = iter(scored)
        with open(out, "w") as f:
            for item, res, group in zip(items, results, groups, strict=True):
                for j, c in enumerate(group):
                    s = next(rows)
                    f.write(json.dumps({
                        "rollout_id": s.rollout_id, "instance_id": item.instance_id, "sample": j,
                        "policy_version": None if c.finish_reason == "oracle" else res.policy_version,
                        "actor_id": res.actor_id, "finish_reason": c.finish_reason, "prompt_tokens": len(item.prompt_ids),
                        "completion_tokens": len(c.token_ids), "reward": s.result.reward, "error": s.result.error,
                        "text": c.text}) + "\n")

    def _metrics(self, groups: list[list[Completion]], results: list[GenerationResult], rewards: torch.Tensor,
                 samples: list[TrainSample], stats: dict[str, float], timer: PhaseTimer) -> dict[str, Any]:
        cfg = self.cfg
        policy = torch.tensor([c.finish_reason != "oracle" for g in groups for c in g])
        r = rewards[policy]
        generated = sum(len(c.token_ids) for g in groups for c in g if c.finish_reason != "oracle")
        gen_s = timer.seconds["generate_s"]
        return {
            "step": self.step + 1,
            "policy_version": self.policy_version,
            "num_rollouts": len(samples),
            "reward_mean": float(r.mean()),
            "reward_std": float(r.std()) if r.numel() > 1 else 0.0,
            "format_error_rate": float((r == -1).double().mean()),
            "zero_signal_frac": float(grpo.zero_signal_groups(rewards, cfg.group_size).double().mean()),
            "truncated_frac": float(np.mean([c.finish_reason == "length" for g in groups for c in g])),
            "completion_len_mean": float(np.mean([len(s.completion_ids) for s in samples])),
            # Version lag of the consumed rollouts: updates applied since the weights that made them.
            "staleness_max": max(self.policy_version - 1 - res.policy_version for res in results),
            **{k: round(v, 6) for k, v in stats.items()},
            **timer.seconds,
            "gen_tokens_per_s": round(generated / gen_s, 2) if gen_s > 0 else 0.0,
            "sync_mb_per_s": round(self.sync_bytes / 2**20 / timer.seconds["sync_s"], 2) if timer.seconds["sync_s"] else 0.0,
            "rollout_actors": len(self.fleet.live),
            "rollout_actor_restarts": self.fleet.stats.restarts,
            "requeued_prompts": self.fleet.stats.requeued_prompts,
            "queue_depth": len(self.fleet.queue),
            # Instances skipped because their prompt exceeds data.max_prompt_tokens (cumulative).
            "prompts_too_long": self.loader.stats.dropped_too_long,
            **self.rewards.stats(),
        }

    def _print(self, m: dict[str, Any]) -> None:
        print(f"[step {m['step']}/{self.cfg.trainer.steps}] v{m['policy_version']} reward {m['reward_mean']:+.3f} "
              f"(std {m['reward_std']:.3f}, format errors {m['format_error_rate']:.0%}) loss {m['loss']:+.4f} | "
              f"generate {m['generate_s']:.1f}s ({m['gen_tokens_per_s']:.0f} tok/s) reward {m['reward_s']:.1f}s "
              f"train {m['train_s']:.1f}s sync {m['sync_s']:.1f}s step {m['step_s']:.1f}s", flush=True)

    def shutdown(self) -> None:
        self.fleet.shutdown()
        self.rewards.shutdown()
        self.learner.shutdown()
        self.control.stop()


@contextmanager
def _timed(metrics: dict[str, Any], key: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    metrics[key] = round(time.perf_counter() - start, 3)


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(dcfg: DictConfig) -> None:
    try:
        cfg = config.load(dcfg)
        print(OmegaConf.to_yaml(dcfg) if cfg.trainer.print_config else "", end="", flush=True)
        trainer = Trainer(cfg)
    except (config.ConfigError, ResumeError, PlacementError, ResourceError, FileNotFoundError, PhaseTimeout) as exc:
        # Bad input (or actors that could not start in time): one clear line naming the field,
        # file, key or actor, not a traceback.
        print(f"[error] {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    try:
        trainer.fit()
    except (PhaseTimeout, RayActorError) as exc:
        # A phase that timed out, or an actor the run cannot go on without (a learner rank:
        # DeepSpeed's group cannot lose a member). Rollout actors that die are restarted in place.
        what = str(exc) if isinstance(exc, PhaseTimeout) else f"an actor died: {exc}"
        print(f"[error] {what}. The last complete checkpoint is in {trainer.run_dir / 'checkpoints'}; "
              "starting again with the same run_dir resumes from it.", file=sys.stderr, flush=True)
        raise
    finally:
        trainer.shutdown()


if __name__ == "__main__":
    sys.exit(main())
