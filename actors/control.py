"""Scaling rollout actors from outside a running job: a named control actor and its command.

The driver starts `FleetControl` as a named actor (namespace "swe_rl", name
"fleet:<run name>") holding the number of rollout actors wanted. A user changes it from any
process connected to the cluster:

    python -m actors.control --run default --actors 3        # scale to 3 engines
    python -m actors.control --run default                   # show wanted / live / step

The driver reads the wanted count at every step boundary and adds actors (each receives the
current weights before its first sample) or retires them (each finishes its chunk first);
the learner is never restarted. Within the driver the same is `trainer.control.set(n)`.
"""

from __future__ import annotations

import argparse
from typing import Any

import ray

from actors.cluster.join import loopback_only
from conf.errors import fail

NAMESPACE = "swe_rl"


class FleetState:
    """The control actor's state (a plain class; made remote by FleetControl.start)."""

    def __init__(self, wanted: int) -> None:
        self.wanted, self.live, self.step = wanted, wanted, 0

    def set_wanted(self, n: int) -> int:
        if n < 1:
            raise ValueError(f"--actors {n}: at least one rollout actor is needed")
        self.wanted = n
        return n

    def get_wanted(self) -> int:
        return self.wanted

    def report(self, live: int, step: int) -> None:
        self.live, self.step = live, step

    def status(self) -> dict[str, int]:
        return {"wanted": self.wanted, "live": self.live, "step": self.step}


# FleetState is a tiny in-memory actor with no CPU of its own: it answers in milliseconds, so a
# minute without an answer means it (or its node) is gone. Not a config knob: nothing to tune.
CALL_TIMEOUT_S = 60.0


def actor_name(run: str) -> str:
    return f"fleet:{run}"


class FleetControl:
    """The driver's handle on its control actor."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    @classmethod
    def start(cls, run: str, wanted: int) -> FleetControl:
        handle = (
            ray.remote(FleetState)
            .options(name=actor_name(run), namespace=NAMESPACE, num_cpus=0, get_if_exists=True)
            .remote(wanted)
        )
        ray.get(handle.report.remote(wanted, 0), timeout=CALL_TIMEOUT_S)
        return cls(handle)

    def desired(self) -> int:
        return int(ray.get(self.handle.get_wanted.remote(), timeout=CALL_TIMEOUT_S))

    def set(self, n: int) -> int:
        return int(ray.get(self.handle.set_wanted.remote(n), timeout=CALL_TIMEOUT_S))

    def report(self, live: int, step: int) -> None:
        ray.get(self.handle.report.remote(live, step), timeout=CALL_TIMEOUT_S)

    def stop(self) -> None:
        ray.kill(self.handle)


def _resolve(address: str) -> str:
    """The cluster's address; "auto" finds the one on this node. A local run's cluster listens
    on 127.0.0.1 only (actors/cluster/join.py): connect to it over loopback too, since Ray would
    otherwise rewrite 127.0.0.1 into this machine's network address."""
    if address != "auto":
        return address
    # Ray's private API: only to resolve address=auto
    from ray._private.services import get_ray_address_from_environment

    found = get_ray_address_from_environment("auto", None)  # ConnectionError when there is none
    if found.rsplit(":", 1)[0] in ("127.0.0.1", "localhost"):
        loopback_only()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actors.control", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--address", default="auto", help="Ray cluster address (default: auto, the local node's cluster)"
    )
    parser.add_argument("--run", required=True, help="the run's name: the last component of its run_dir")
    parser.add_argument("--actors", type=int, help="number of rollout actors wanted; omit to print the status")
    args = parser.parse_args(argv)
    try:
        ray.init(address=_resolve(args.address), namespace=NAMESPACE, logging_level="error")
    except ConnectionError as exc:  # no cluster at that address
        fail(parser.prog, f"--address {args.address}: no Ray cluster to connect to ({exc})")
    try:
        handle = ray.get_actor(actor_name(args.run), namespace=NAMESPACE)
    except ValueError:
        fail(
            parser.prog,
            f"--run {args.run}: no running job of that name on this cluster "
            f"(looked for actor {actor_name(args.run)!r})",
        )
    if args.actors is not None:
        ray.get(handle.set_wanted.remote(args.actors), timeout=CALL_TIMEOUT_S)
    print(ray.get(handle.status.remote(), timeout=CALL_TIMEOUT_S))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
