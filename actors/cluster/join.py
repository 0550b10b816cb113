"""Starting or joining Ray: the one place that decides where the trainer's sockets listen.

A local cluster (the laptop, tests) must keep every socket on 127.0.0.1. Ray binds some of
them to the machine's network address even when told 127.0.0.1 unless
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (measured with `ss -ltnp`). Ray reads that variable once,
when `ray._private.ray_constants` is first imported, while its own processes read the
environment: so the variable is set for them and the driver's constant is corrected if Ray was
imported before. A real cluster is joined by address and must not have this: its nodes need
their real addresses.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import ray

from actors.cluster import quiet as ray_quiet
from actors.cluster.reaper import scoped_tmp, watch
from conf.config import RayConfig
from conf.errors import UserError
from conf.logs import third_party_level
from learner.transport.collective import LOOPBACK_ENV
from reward.kinds import REWARDS

if TYPE_CHECKING:
    from conf.config import TrainConfig


def loopback_only() -> None:
    """Make a local Ray started after this call listen on 127.0.0.1 only."""
    os.environ[LOOPBACK_ENV] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[attr-defined]


def auth_token() -> Path:
    """Ray 2.60's token file (token authentication): whoever reads it can submit jobs."""
    return Path.home() / ".ray" / "auth_token"


def private_token() -> None:
    """Create Ray's token file readable by its owner only (Ray writes it with the umask, 644
    here), or tighten an existing one. Before a local start, so that it is never readable by
    others, and after joining a cluster, for the token that node already had."""
    token = auth_token()
    token.parent.mkdir(mode=0o700, exist_ok=True)
    if not token.exists():
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))  # Ray's own format: 256 random bits, hex
    if token.stat().st_mode & 0o077:
        token.chmod(0o600)


def starts_local(address: str) -> bool:
    """Whether init_ray(address) starts a local cluster (rather than joining one)."""
    return not (address or os.environ.get("RAY_ADDRESS"))


def init_ray(
    address: str,
    *,
    num_cpus: int,
    include_dashboard: bool,
    quiet: bool,
    verbose: bool = False,
    **kwargs: object,
) -> None:
    """Join the cluster at `address` (or RAY_ADDRESS, as under `ray job submit`); with neither,
    start a local one on 127.0.0.1 with `num_cpus` logical CPUs, its control plane quieted
    with `quiet` (actors/cluster/quiet.py)."""
    if ray.is_initialized():
        return
    # Ray's own advisories (start-up, token authentication) only with verbose: conf/logs.py.
    kwargs.setdefault("logging_level", third_party_level(verbose))
    if not starts_local(address):
        ray.init(address=address or None, **kwargs)
        if auth_token().exists():
            private_token()
        return
    loopback_only()
    private_token()
    tmp_root = scoped_tmp()  # the run's temporary files, removed when it ends (actors/cluster/reaper.py)
    with ray_quiet.environment(quiet):
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=include_dashboard,
            dashboard_host="127.0.0.1",
            _node_ip_address="127.0.0.1",
            **kwargs,
        )
    watch(tmp_root)  # the local cluster ends with its driver, even a SIGKILLed one
    if quiet:
        ray_quiet.deprioritize(ray_quiet.control_plane_pids(os.getpid()))


def resource_demands(cfg: TrainConfig) -> list[tuple[str, int, dict[str, float]]]:
    """What a training config asks of the cluster: (what, how many, resources of one)."""
    runners = cfg.reward.execution.num_runners if REWARDS.get(cfg.reward.kind).uses_test_pool else 0
    runners += (
        cfg.reward.execution.num_runners if cfg.trainer.selfplay else 0
    )  # self-play proves its bugs on its own pool
    return [
        ("test runner (reward.execution.num_cpus)", runners, {"CPU": cfg.reward.execution.num_cpus}),
        (
            "rollout actor (rollout.num_cpus/num_gpus)",
            cfg.rollout.num_actors,
            {"CPU": cfg.rollout.num_cpus, "GPU": cfg.rollout.num_gpus},
        ),
        ("reward actor (reward.num_cpus)", cfg.reward.num_workers, {"CPU": cfg.reward.num_cpus}),
        (
            "learner rank (learner.num_cpus_per_rank/num_gpus_per_rank)",
            cfg.learner.num_ranks,
            {"CPU": cfg.learner.num_cpus_per_rank, "GPU": cfg.learner.num_gpus_per_rank},
        ),
    ]


class ResourceError(UserError, RuntimeError):
    """The cluster cannot hold what the config asks for; the message says what is missing."""


def check_fits(demands: list[tuple[str, int, dict[str, float]]], nodes: list[dict[str, float]]) -> None:
    """Refuse, before anything starts, a config the cluster cannot hold (instead of waiting for
    resources that will never come). `demands`: (what, count, resources of one). `nodes`: each
    alive node's total resources. Checks the totals and that one of each fits on some node."""
    problems = []
    for key in ("CPU", "GPU"):
        need = sum(count * res.get(key, 0.0) for _, count, res in demands)
        have = sum(n.get(key, 0.0) for n in nodes)
        if need > have + 1e-9:
            parts = ", ".join(
                f"{what} {count} x {res.get(key, 0.0):g}" for what, count, res in demands if count and res.get(key)
            )
            problems.append(f"{need:g} {key} in total ({parts}) but the cluster has {have:g}")
    for what, count, res in demands:
        if count and not any(all(n.get(k, 0.0) + 1e-9 >= v for k, v in res.items()) for n in nodes):
            problems.append(f"one {what} needs {res} but no node has that much")
    if problems:
        raise ResourceError("the cluster cannot hold this config: " + "; ".join(problems))


@contextmanager
def ray_session(address: str, workers: int) -> Iterator[int]:
    """Connect to `address`, or start a local Ray of `workers` CPUs bound to 127.0.0.1.

    Yields the number of CPUs the tasks can use. Always disconnects on exit.
    """
    quiet = RayConfig().quiet  # the trainer's default for a local cluster (actors/cluster/quiet.py)
    init_ray(address, num_cpus=workers, include_dashboard=False, quiet=quiet, log_to_driver=False)
    try:
        yield max(int(ray.cluster_resources().get("CPU", 1)), 1)
    finally:
        ray.shutdown()
