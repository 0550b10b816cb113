"""SWE-RL on Ray: the driver (Hydra main). `python train.py [overrides]`.

One step is a pipeline of named, timed phases, each one call on a component:

    data        rollouts.prefetch     the step's prompts, queued on the engines    actors/driver/generation.py
    generate    sampler.sample        samples per prompt (staleness, oracle)       actors/driver/generation.py
    reward      (sampler.sample)      `reward.kind` on the reward actors; DAPO's   actors/driver/reward_pool.py,
                                      dynamic sampling refills flat groups         actors/driver/dynamic_sampling.py
    advantages  advantage(...)        `learner.advantage` over each group          learner/objectives/advantages.py
    train       learner.train         one update (`learner.loss`) on DeepSpeed     learner/group.py
    sync        weights.push          to every engine (`trainer.weight_transport`) actors/driver/weight_sync.py
    checkpoint  checkpoints.save      every `trainer.checkpoint_every` steps       learner/checkpoint.py
    log         log.write             dashboard gauges, `trainer.loggers`          actors/driver/run_log.py

Every remote call is awaited within `trainer.phase_timeout_s`, so a failed or hung actor
surfaces in the phase that used it, by name. `trainer.mode=sync` is the paper's on-policy loop;
`async` generates the next `trainer.max_staleness` steps while the learner trains; with
`trainer.selfplay` the policy writes the step's bugs, then repairs them (actors/driver/selfplay.py).
"""

from __future__ import annotations

import logging
import sys
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

import hydra
import ray
import torch
from omegaconf import DictConfig, OmegaConf
from ray.exceptions import RayActorError

from actors import plugins
from actors.cluster.join import check_fits, init_ray, resource_demands, starts_local
from actors.cluster.reaper import scoped_tmp
from actors.control import FleetControl
from actors.driver.agent_metrics import agent_metrics
from actors.driver.dynamic_sampling import GroupSampler
from actors.driver.generation import Rollouts, group_advantages, overlong_penalty, train_samples, valid_samples
from actors.driver.reward_pool import RewardPool
from actors.driver.run_log import Probe, RunLog, merged, step_metrics
from actors.driver.selfplay import SelfPlay
from actors.driver.weight_sync import SyncCheck, WeightSync
from actors.observe.phases import PhaseTimeout, PhaseTimer
from actors.rollout.fleet import RolloutFleet
from conf import config, logs
from conf import device as devices
from conf.errors import UserError
from conf.io import write_text
from conf.runtime import Runtime
from data.loader import InstanceLoader
from learner import models
from learner.batch import nominal_micro_batches
from learner.checkpoint import Checkpointer
from learner.group import LearnerGroup
from learner.objectives.advantages import ADVANTAGES
from learner.sft import warm_start

config.register()
log = logging.getLogger("train")


class Trainer:
    def __init__(self, cfg: config.TrainConfig) -> None:
        self.cfg, verbose = cfg, cfg.trainer.verbose
        self.run_dir = config.prepare_run_dir(cfg.run_dir)
        if starts_local(cfg.ray.address):
            scoped_tmp()  # before anything caches the temporary directory (actors/cluster/reaper.py)
        # What can be refused is checked before Ray starts: the checkpoint, the model, every shard.
        self.checkpoints = Checkpointer(self.run_dir, asdict(cfg), keep=cfg.trainer.keep_checkpoints)
        device, timeout = devices.of_run(cfg), cfg.trainer.phase_timeout_s
        path, template, self.tokenizer = models.prepare(cfg.model)  # once: every actor gets these two
        run = Runtime(path, cfg.model.dtype, cfg.seed, device, timeout, verbose, chat_template=template)
        prompts = Rollouts.messages(cfg)  # the paper's, or with rollout.mode=agent the episode's
        self.loader = InstanceLoader.from_config(cfg.data, self.tokenizer, seed=cfg.seed, messages=prompts)
        sampler = SelfPlay if cfg.trainer.selfplay else GroupSampler
        sampler.check_data(cfg, self.loader)  # what the step needs of the data, before Ray starts
        r = cfg.ray
        init_ray(r.address, num_cpus=r.num_cpus, include_dashboard=r.include_dashboard, quiet=r.quiet, verbose=verbose)
        check_fits(resource_demands(cfg), [n["Resources"] for n in ray.nodes() if n["Alive"]])
        actors = (cfg.rollout.num_actors, cfg.reward.num_workers, cfg.learner.num_ranks)
        log.info("[setup] %s on %s: %d rollout, %d reward and %d learner actor(s)", run.model_path, device, *actors)
        # The learner's placement group first: a cluster that cannot hold it fails fast, by name.
        rows, pad = cfg.trainer.prompts_per_step * cfg.group_size, self.tokenizer.pad_token_id
        micro_batches = nominal_micro_batches(rows, cfg.learner.num_ranks, cfg.learner.micro_batch_size)
        self.learner = LearnerGroup(cfg.learner, run, rollout=cfg.rollout, micro_batches=micro_batches, pad_id=pad)
        self.weights = WeightSync(self.learner, cfg)
        self.fleet = RolloutFleet(cfg.rollout, run, catch_up=self.weights.catch_up)
        self.rewards = RewardPool(cfg.reward)
        self.fleet.wait_ready()
        self.probe = Probe(cfg, self.tokenizer, self.fleet, self.rewards, self.run_dir)
        self.rollouts = Rollouts(cfg, self.loader, self.fleet, self.tokenizer)
        self.sampler = sampler(cfg, self.rollouts, self.rewards)
        self.advantage = ADVANTAGES.get(cfg.learner.advantage)
        self.control = FleetControl.start(self.run_dir.name, cfg.rollout.num_actors)
        self.log = RunLog(self.run_dir, cfg.trainer, config=asdict(cfg))
        self.log.resume(ckpt := self.checkpoints.restore(self.learner, self.loader))
        self.step, self.policy_version = (ckpt.step, int(ckpt.state["policy_version"])) if ckpt else (0, 0)
        log.info("[setup] ready: every actor started; step %d of %d next", self.step + 1, cfg.trainer.steps)

    def fit(self) -> None:
        warm = lambda: warm_start(self.cfg, self.learner, self.tokenizer, self.run_dir)  # noqa: E731
        self.probe.before_rl(self.step, warm, lambda: self.weights.push(self.fleet, self.policy_version))
        while self.step < self.cfg.trainer.steps:
            self.scale_fleet()
            metrics = self.train_step()
            self.step += 1
            if self.step % self.cfg.trainer.checkpoint_every == 0 or self.step == self.cfg.trainer.steps:
                timer = PhaseTimer()
                with timer("checkpoint"):
                    loader = self.rollouts.loader_state(self.step)  # before the prompts of steps not trained yet
                    self.checkpoints.save(
                        self.learner, loader, step=self.step, policy_version=self.policy_version, metrics=metrics
                    )
                metrics = merged(metrics, timer.seconds)
            self.log.write(metrics)
        self.log.finish(self.step, self.probe)

    def train_step(self) -> dict[str, Any]:
        cfg, timer = self.cfg, PhaseTimer()
        with timer("data"):
            self.rollouts.prefetch(self.step)
        groups, scored, sampled = self.sampler.sample(self.step, self.policy_version, timer)  # generate, reward
        rewards = torch.tensor([s.result.reward for s in scored], dtype=torch.float64)  # [prompts * group_size]
        with timer("advantages"):
            penalty = overlong_penalty(groups, cfg)  # [prompts * group_size], 0 unless learner.overlong=soft
            advantages = group_advantages(rewards + penalty, valid_samples(groups), cfg.group_size, self.advantage, cfg)
            samples = train_samples(groups, advantages.tolist(), keep_cut=cfg.agent.keep_cut_episodes)
        probe = samples[0].prompt_ids + samples[0].completion_ids
        check = SyncCheck(self.learner, self.fleet, probe) if cfg.trainer.verify_sync else None
        with timer("train"):
            stats = self.learner.train(samples, wait=lambda refs: self.fleet.wait(refs, "train"))
        self.policy_version += 1
        with check.around() if check else nullcontext(), timer("sync"):
            self.weights.push(self.fleet, self.policy_version)
        self.log.rollouts(self.step + 1, groups, scored)
        return merged(
            {"step": self.step + 1, "policy_version": self.policy_version},
            step_metrics(groups, scored, rewards, self.policy_version, timer.seconds, self.weights.nbytes),
            {k: round(v, 6) for k, v in stats.items()},
            {k: round(v, 6) for k, v in check.stats.items()} if check else {},
            timer.seconds,
            self.fleet.metrics(),
            self.rewards.stats(),
            {"prompts_too_long": self.loader.stats.dropped_too_long, "step_s": timer.total()},
            sampled,
            {"overlong_penalty_mean": float(penalty.mean())},
            agent_metrics(groups),
        )

    def scale_fleet(self) -> None:
        """Add or retire rollout actors to match the count asked through `python -m actors.control`."""
        self.fleet.scale_to(self.control.desired())
        self.control.report(len(self.fleet.live), self.step)

    def shutdown(self) -> None:
        self.log.close()
        for part in (self.sampler, self.fleet, self.rewards, self.learner):
            part.shutdown()
        self.control.stop()


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(dcfg: DictConfig) -> None:
    logs.setup()
    config.place_sweep_job(dcfg)  # every job of a sweep (-m) in a directory of its own
    try:
        cfg = plugins.load(dcfg)
        logs.setup(cfg.trainer.verbose)
        if cfg.trainer.verbose:
            log.info("%s", OmegaConf.to_yaml(dcfg))
        trainer = Trainer(cfg)
        write_text(trainer.run_dir / "config.yaml", OmegaConf.to_yaml(dcfg))
    except (UserError, FileNotFoundError, PhaseTimeout) as exc:
        # Bad input, or actors that could not start in time: one line naming it, not a traceback.
        log.error("[error] %s", exc)
        raise SystemExit(2) from None
    try:
        trainer.fit()
    except UserError as exc:  # bad input found mid-run (a row of a shard): one line, and what was done is kept
        log.error("[error] %s", exc)
        raise SystemExit(2) from None
    except (PhaseTimeout, RayActorError) as exc:
        # A phase that timed out, or an actor the run cannot go on without (a learner rank:
        # DeepSpeed's group cannot lose a member). Rollout actors that die are restarted in place.
        what = str(exc) if isinstance(exc, PhaseTimeout) else f"an actor died: {exc}"
        where = trainer.run_dir / "checkpoints"
        log.error(
            "[error] %s. The last complete checkpoint is in %s; run again with this run_dir to resume.", what, where
        )
        raise
    finally:
        trainer.shutdown()


if __name__ == "__main__":
    sys.exit(main())
