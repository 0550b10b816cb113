"""Where a step's metrics line goes, chosen by `trainer.loggers` (default `[console, jsonl]`).

A logger is a class registered under a name in `LOGGERS`, built once by the run log
(actors/driver/run_log.py) with the run's `RunInfo`, and called once per step with the metrics line:

    console      the one `[step k/n]` line per step
    jsonl        <run_dir>/metrics.jsonl (the record the tests, plots and resume read)
    tensorboard  event files in <run_dir>/tensorboard (tensorboardX; extra `tensorboard`)
    wandb        a Weights & Biases run named after the run directory (extra `wandb`)

TensorBoard and W&B show every number under a group (`reward/`, `learner/`, `timing/`,
`fleet/`, `sync/`: `metric_group`), keyed by the metrics.jsonl name, so a chart's title is
docs/metrics.md's entry. A logger that needs a package beyond the base install names
it in `requires`; `check_installed` refuses such a logger at config time, before Ray starts,
with the pip command of the extra named like the logger.

Resume: a run continues from its checkpoint's step, and the steps logged after it run again
(actors/driver/run_log.py). TensorBoard is opened with `purge_step` = that step + 1, which makes
TensorBoard hide the earlier values of the steps run again (the same rule as metrics.jsonl:
a step's last line counts). W&B's steps only move forward, so its logger skips the steps run
again and keeps their first values; the run id is kept in <run_dir>/wandb_id and reused.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import secrets
import struct
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from conf.errors import UserError
from conf.registry import Registry

log = logging.getLogger(__name__)


class LoggerUnavailable(UserError):
    """A selected logger's package is not installed, or its service refused the run."""


@dataclass(frozen=True)
class RunInfo:
    run_dir: Path
    name: str  # the run directory's name: the W&B run name, the dashboard gauges' `run` tag
    config: dict[str, Any]  # the composed config (W&B's run config)
    steps: int  # trainer.steps, for "step k/n"
    resumed_step: int  # the checkpoint's step the run continues from; 0 for a fresh start
    wandb_project: str  # trainer.wandb_project


class Logger(ABC):
    # The module the logger imports beyond the base install; its pip extra has the logger's name.
    requires: ClassVar[str | None] = None

    def __init__(self, run: RunInfo) -> None:
        self.run = run

    @abstractmethod
    def write(self, metrics: dict[str, Any]) -> None:
        """One step's metrics line (`step` is always there; `rerun` on a step run again)."""

    def close(self) -> None:  # noqa: B027 - optional hook: the console and jsonl hold nothing open
        """Flush and release (end of the run, or a failed one)."""


LOGGERS: Registry[type[Logger]] = Registry("logger", "trainer.loggers")


def check_installed(names: Sequence[str]) -> None:
    """Refuse a logger whose package is missing: one line with the command that installs it."""
    for name in names:
        module = LOGGERS.get(name).requires
        if module is not None and importlib.util.find_spec(module) is None:
            raise LoggerUnavailable(f'trainer.loggers: {name!r} needs the {module} package: pip install -e ".[{name}]"')


# The reward signal of the policy's own samples, and the learner's statistics. Reward-pool and
# test-runner counters (reward_timeouts, test_runs, ...) are fleet health, not reward.
_REWARD = {
    "num_rollouts",
    "reward_mean",
    "reward_std",
    "format_error_rate",
    "resolve_rate",
    "zero_signal_frac",
    "truncated_frac",
    "completion_len_mean",
    "overlong_penalty_mean",  # DAPO's soft length penalty, added to the reward (learner.overlong=soft)
    "dynamic_sampling_rounds",  # DAPO's extra generate-and-score rounds (trainer.dynamic_sampling)
    "dynamic_sampling_dropped",  # flat groups it left out of the batch
}
_LEARNER = {
    "policy_version",
    "loss",
    "grad_norm",
    "clip_frac",
    "approx_kl_old",
    "ratio_mean",
    "kl_ref",
    "entropy",
    "rows_trained",
    "pad_frac",
    "pad_frac_unsorted",
    "overlong_filtered",  # samples cut at the limit left out of the update (learner.overlong=filter)
    "logprob_diff_mean",  # rollout/learner mismatch, before the update (learner/objectives/mismatch.py)
    "logprob_diff_max",
}


def metric_group(key: str) -> str:
    """The chart group of a metrics.jsonl key: reward, learner, timing, sync or fleet."""
    if key in _REWARD or key.startswith("selfplay_"):  # self-play's bugs and their rewards
        return "reward"
    if key in _LEARNER:
        return "learner"
    if key.startswith("sync_") or key == "params_changed":
        return "sync"
    if key.endswith("_s") and not key.endswith("_per_s"):  # phase seconds, not a rate
        return "timing"
    return "fleet"  # engines, queue, staleness, throughput, the reward and test-runner pools


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """`group/key` -> value for every number of a metrics line except the step itself."""
    return {
        f"{metric_group(k)}/{k}": float(v)
        for k, v in metrics.items()
        if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
    }


@LOGGERS.register("console")
class Console(Logger):
    def write(self, metrics: dict[str, Any]) -> None:
        m = metrics
        log.info(
            "[step %d/%d] v%d reward %+.3f (std %.3f, format errors %.0f%%) loss %+.4f | generate %.1fs "
            "(%.0f tok/s) reward %.1fs train %.1fs sync %.1fs step %.1fs",
            m["step"],
            self.run.steps,
            m["policy_version"],
            m["reward_mean"],
            m["reward_std"],
            100 * m["format_error_rate"],
            m["loss"],
            m["generate_s"],
            m["gen_tokens_per_s"],
            m["reward_s"],
            m["train_s"],
            m["sync_s"],
            m["step_s"],
        )


@LOGGERS.register("jsonl")
class Jsonl(Logger):
    """Appended to, never rewritten (the run log's docstring says how reruns are marked)."""

    def write(self, metrics: dict[str, Any]) -> None:
        with open(self.run.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")


@LOGGERS.register("tensorboard")
class TensorBoard(Logger):
    """tensorboardX, not torch.utils.tensorboard: the same event files from one 350 kB package
    with no further dependencies (protobuf is already installed), where torch's writer needs
    the whole `tensorboard` package (its web server and five more packages)."""

    requires = "tensorboardX"

    def __init__(self, run: RunInfo) -> None:
        super().__init__(run)
        # tensorboardX: an optional package, only with that logger
        from tensorboardX import SummaryWriter

        logdir = run.run_dir / "tensorboard"
        earlier = sorted(logdir.glob("events.out.tfevents.*")) if logdir.is_dir() else []
        # tensorboardX names a file by the second it opens it and truncates an existing one:
        # the suffix keeps two starts within a second apart, in order.
        self.writer = SummaryWriter(
            str(logdir), purge_step=run.resumed_step + 1, filename_suffix=f".{len(earlier)}", flush_secs=10
        )

    def write(self, metrics: dict[str, Any]) -> None:
        for tag, value in scalars(metrics).items():
            self.writer.add_scalar(tag, value, metrics["step"])
        self.writer.flush()  # a step every many seconds: a killed driver loses no step

    def close(self) -> None:
        self.writer.close()


@LOGGERS.register("wandb")
class WandB(Logger):
    """`WANDB_MODE=offline` logs to <run_dir>/wandb with no network; `wandb sync` uploads later."""

    requires = "wandb"

    def __init__(self, run: RunInfo) -> None:
        super().__init__(run)
        # wandb: an optional package, only with that logger
        import wandb

        id_file = run.run_dir / "wandb_id"
        # Written before the run starts: a driver that dies at any point resumes the same run.
        if not id_file.is_file():
            id_file.write_text(secrets.token_hex(6) + "\n")  # W&B ids: lowercase letters and digits
        try:
            self.wb = wandb.init(
                project=run.wandb_project,
                name=run.name,
                id=id_file.read_text().strip(),
                resume="allow",
                config=run.config,
                dir=str(run.run_dir),
                # Its banner and hints would break the console's one-line-per-step; one line below.
                settings=wandb.Settings(silent=True),
            )
        except wandb.errors.Error as exc:  # no API key or no network: one line, not a traceback
            raise LoggerUnavailable(f"wandb: {exc} (WANDB_MODE=offline logs without a W&B server)") from None
        where = f"offline in {self.wb.settings.sync_dir} (`wandb sync` uploads it)" if self.wb.offline else self.wb.url
        log.info("[setup] W&B run %s: %s", self.wb.id, where)

    def write(self, metrics: dict[str, Any]) -> None:
        if metrics.get("rerun"):  # W&B drops steps below its latest one anyway; say so here
            return
        self.wb.log(scalars(metrics), step=metrics["step"])

    def close(self) -> None:
        self.wb.finish()


def read_scalars(logdir: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} as TensorBoard shows a directory of event files: files in name
    order, and a session start at step s (a resume's `purge_step`) hides the values written
    before it at steps >= s. For tests and for checking a run without TensorBoard installed."""
    # tensorboardX: an optional package, only with that logger
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    out: dict[str, dict[int, float]] = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data, pos = path.read_bytes(), 0
        while pos + 12 <= len(data):
            # A TFRecord: uint64 length, uint32 CRC of it, the bytes, uint32 CRC of them.
            (length,) = struct.unpack("<Q", data[pos : pos + 8])
            event = Event.FromString(data[pos + 12 : pos + 12 + length])
            pos += 12 + length + 4
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                for values in out.values():
                    for step in [s for s in values if s >= event.step]:
                        del values[step]
            for value in event.summary.value:
                out.setdefault(value.tag, {})[event.step] = value.simple_value
    return out
