"""The policy measured on fixed prompts with fixed seeds, and the run's closing summary.

    Probe.measure(label)   `trainer.probe_prompts` prompts of each split (the training split's
                           first ones in the seed's order, and the held-out split's when
                           data.heldout_fraction > 0), trainer.probe_samples samples each, by the
                           engines' current weights and scored by `reward.kind`. The same
                           prompts and sampling seeds every time (common random numbers), so two
                           measurements differ by what the policy learned, not by which prompts
                           or draws they got. Nothing trains on these samples.
    summary_lines(...)     the last lines of a run: reward and format errors from the first
                           measurement to the last, the RL steps' own means, and what the warm
                           start and the held-out split show.

The driver measures before anything trains ("start"), after the SFT warm start when there is
one ("sft"), after every `trainer.probe_every`-th RL step ("step N") and after the last RL step
("end": the last step's measurement when it had one, not sampled twice); results go to
<run_dir>/probe.jsonl, which reward_curve.png draws (learner/plot.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from actors.driver.generation import Group
from actors.driver.reward_pool import RewardPool
from actors.rollout.actor import GenerationRequest, request_seed
from actors.rollout.fleet import RolloutFleet
from conf.config import TrainConfig
from data.loader import InstanceLoader, PromptItem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Measurement:
    """One split's probe: the mean reward and the fraction malformed (-1) of its samples."""

    reward_mean: float
    format_error_rate: float
    samples: int
    prompts: int


def first_prompts(loader: InstanceLoader, n: int) -> list[PromptItem]:
    """Up to `n` distinct instances, in the loader's order, from its first epoch."""
    items: list[PromptItem] = []
    seen: set[str] = set()
    while len(items) < n:
        try:
            (item,) = loader.next_batch(1)
        except ValueError:  # no instance of this split fits the prompt limit
            break
        if item.instance_id in seen or loader.epoch > 0:
            break
        seen.add(item.instance_id)
        items.append(item)
    return items


def measure(rewards: Sequence[float]) -> tuple[float, float]:
    """(mean reward, fraction of samples scored -1: malformed)."""
    n = len(rewards)
    return sum(rewards) / n, sum(r == -1 for r in rewards) / n


class Probe:
    def __init__(self, cfg: TrainConfig, tokenizer: Any, fleet: RolloutFleet, rewards: RewardPool, run_dir: Path):
        self.cfg, self.fleet, self.rewards, self.path = cfg, fleet, rewards, run_dir / "probe.jsonl"
        n = cfg.trainer.probe_prompts
        if n and (cfg.rollout.mode != "single" or cfg.trainer.selfplay):  # it samples single answers
            log.info("[probe] off: trainer.probe_prompts measures single answers, not agent episodes or self-play")
            n = 0
        self.splits: dict[str, list[PromptItem]] = {}  # none with trainer.probe_prompts=0: no probe
        if n:
            train = InstanceLoader.from_config(cfg.data, tokenizer, seed=cfg.seed)
            self.splits["train"] = first_prompts(train, n)
        if n and cfg.data.heldout_fraction > 0:
            heldout = InstanceLoader.from_config(cfg.data, tokenizer, seed=cfg.seed)
            heldout.split = "heldout"
            self.splits["heldout"] = first_prompts(heldout, n)
        # label -> split -> measurement; a resumed run keeps what its first part measured
        self.results: dict[str, dict[str, Measurement]] = {}
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                row = json.loads(line)
                label = row.pop("label")
                fields = Measurement.__dataclass_fields__
                self.results[label] = {k: Measurement(**{f: v[f] for f in fields}) for k, v in row.items()}

    def before_rl(self, step: int, warm_start: Callable[[], object], push: Callable[[], object]) -> None:
        """Before the first RL step of a run that starts at `step`: a fresh run (step 0) measures
        the model as loaded ("start") and runs the warm start when learner.sft_steps > 0; the
        learner's weights go to the engines (always: a resumed run's engines load the base
        model); then the warm-started policy is measured ("sft")."""
        sft = step == 0 and self.cfg.learner.sft_steps > 0
        if step == 0:
            self.measure("start")
        if sft:
            warm_start()
        push()
        if sft:
            self.measure("sft")

    def after_step(self, step: int) -> None:
        """After RL step `step` (1-based): measured as "step N" every `trainer.probe_every` steps."""
        every = self.cfg.trainer.probe_every
        if every and step % every == 0:
            self.measure(step_label(step))

    def end(self, step: int) -> dict[str, dict[str, Measurement]]:
        """After the last RL step `step`: the last measurement ("end"), which is that step's
        when after_step took one (same weights, same seeds: the same samples); every
        measurement of the run."""
        last = self.results.get(step_label(step))
        if last is None:
            self.measure("end")
        else:
            self.results["end"] = last
            self._append("end", last, seconds=0.0)
        return self.results

    def measure(self, label: str) -> dict[str, Measurement]:
        if not self.splits:
            return {}
        start, out = time.perf_counter(), {}
        for split, items in self.splits.items():
            if not items:
                continue
            # The seed leaves out the label: every measurement draws with the same seeds.
            keys = [f"probe/{split}/{k}/{it.instance_id}" for k, it in enumerate(items)]
            requests = [
                GenerationRequest(
                    f"{label}/{key}", it.prompt_ids, self.cfg.trainer.probe_samples, request_seed(self.cfg.seed, key)
                )
                for key, it in zip(keys, items, strict=True)
            ]
            results = self.fleet.generate(requests)
            groups = [
                Group(r.request_id, it, r.completions, r.policy_version, r.actor_id)
                for r, it in zip(results, items, strict=True)
            ]
            scores = [s.result.reward for s in self.rewards.score_groups(groups)]
            mean, malformed = measure(scores)
            out[split] = Measurement(mean, malformed, len(scores), len(items))
        self.results[label] = out
        seconds = round(time.perf_counter() - start, 1)
        self._append(label, out, seconds)
        for split, m in out.items():
            log.info(
                "[probe] %s, %s: reward %.3f, format errors %s (%d prompts x %d samples, %.0f s)",
                label,
                split,
                m.reward_mean,
                _pct(m.format_error_rate),
                m.prompts,
                m.samples // m.prompts,
                seconds,
            )
        return out

    def _append(self, label: str, out: Mapping[str, Measurement], seconds: float) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"label": label, **{k: asdict(v) | {"s": seconds} for k, v in out.items()}}) + "\n")


def step_label(step: int) -> str:
    """The probe's label after RL step `step` (learner/plot.py reads it back)."""
    return f"step {step}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def summary_lines(probes: Mapping[str, Mapping[str, Measurement]], steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The run's closing lines. `probes`: label ("start", "sft", "end") -> split -> measurement;
    `steps`: the RL steps' metrics lines (reward_mean, format_error_rate of the policy's own
    samples). Start and end are the probe's (same prompts, same seeds) when it ran, else the
    first and last RL step's."""
    rewards = ", ".join(f"{m['reward_mean']:.3f}" for m in steps)
    errors = ", ".join(_pct(m["format_error_rate"]) for m in steps)
    train = {label: p["train"] for label, p in probes.items() if "train" in p}
    if "start" in train and "end" in train:
        first, last = train["start"], train["end"]
        r0, r1, e0, e1 = first.reward_mean, last.reward_mean, first.format_error_rate, last.format_error_rate
        how = (
            f"the policy's own samples, {first.prompts} training prompts x {first.samples // first.prompts}, same seeds"
        )
    elif steps:
        r0, r1 = steps[0]["reward_mean"], steps[-1]["reward_mean"]
        e0, e1 = steps[0]["format_error_rate"], steps[-1]["format_error_rate"]
        how = "first and last RL step's samples"
    else:
        return []
    lines = [
        f"[summary] reward {r0:.3f} -> {r1:.3f} (per step: {rewards}) [{how}]",
        f"[summary] format errors {_pct(e0)} -> {_pct(e1)} (per step: {errors})",
    ]
    if "start" in train and "sft" in train and "end" in train:
        s0, s1, s2 = train["start"], train["sft"], train["end"]
        lines.append(
            f"[summary] warm start: reward {s0.reward_mean:.3f} -> {s1.reward_mean:.3f}, format errors "
            f"{_pct(s0.format_error_rate)} -> {_pct(s1.format_error_rate)}; then GRPO: reward "
            f"{s1.reward_mean:.3f} -> {s2.reward_mean:.3f}, format errors {_pct(s1.format_error_rate)} -> "
            f"{_pct(s2.format_error_rate)}"
        )
    curve = [(label, m) for label, m in train.items() if label.startswith("step ")]
    if curve:
        first_label = "sft" if "sft" in train else "start"
        points = [f"{train[first_label].reward_mean:.3f} ({first_label})"] if first_label in train else []
        points += [f"{m.reward_mean:.3f} ({label})" for label, m in sorted(curve, key=lambda x: int(x[0].split()[1]))]
        lines.append(f"[summary] the probe's training reward along RL: {' -> '.join(points)}")
    held = [probes[label]["heldout"] for label in ("start", "sft", "end") if "heldout" in probes.get(label, {})]
    if len(held) >= 2:
        h = held[0]
        path = " -> ".join(f"{m.reward_mean:.3f}" for m in held)
        errs = " -> ".join(_pct(m.format_error_rate) for m in held)
        lines.append(f"[summary] held-out ({h.prompts} prompts, never trained on): reward {path}, format errors {errs}")
    return lines
