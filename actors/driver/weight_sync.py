"""Weight sync, the driver's side: after every update, push the learner's weights to every engine.

The transports (who sends what, how; the bucket plan) are in learner/transport/. Here:

    push(fleet, version)   every live engine loads the learner's weights of `version`.
        A rendezvous transport (the default, `collective`) first re-forms its group when the
        set of live engines changed (an engine added, retired or restarted): rank 0 of the
        learner opens it, the learner's rank 0 and every engine's workers join. Then the
        learner's send (every rank: ZeRO-3 gathers) and every engine's receive are started
        together and awaited together; a non-rendezvous transport's receivers are handed the
        reference to the sender's shipment instead, which Ray resolves before they run.
        Nothing new is dispatched to the engines meanwhile (fleet.wait(dispatch=False)).
    catch_up(handle)       one engine outside the group (new, restarted) gets the learner's
        current weights through the object store, tagged with the learner's own update count.

Each engine reports the version it loaded; a mismatch is an error (a lost or stale sync).
`trainer.verify_sync` adds a `SyncCheck`: the learner's parameters must have changed in the
update, and the engine's logprobs of a probe sequence must differ from the learner's before
the sync and agree after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import ray

from actors.rollout.fleet import RolloutFleet
from conf.config import TrainConfig
from learner.group import LearnerGroup
from learner.transport import CATCH_UP, TRANSPORTS, Shipment
from learner.transport.buckets import Bucket


def sync_world_size(engines: int, ranks_per_engine: int) -> int:
    """Members of a rendezvous sync group: the learner's rank 0 (the sender) and every worker of
    every live engine (learner/transport/collective.py lays out the ranks)."""
    return 1 + engines * ranks_per_engine


class WeightSync:
    def __init__(self, learner: LearnerGroup, cfg: TrainConfig) -> None:
        self.learner, self.timeout_s = learner, cfg.trainer.phase_timeout_s
        self.transport = TRANSPORTS.get(cfg.trainer.weight_transport)  # the class: both sides instantiate it
        self.rendezvous = self.transport.rendezvous
        self.plan: list[Bucket] = learner.weight_plan(cfg.trainer.sync_bucket_mb << 20, cfg.model.dtype)
        self.nbytes = sum(b.nbytes for b in self.plan)

    def push(self, fleet: RolloutFleet, version: int) -> list[dict[str, Any]]:
        """Every live engine loads the learner's weights; returns each engine's report."""
        if self.rendezvous and fleet.needs_group():
            world_size = sync_world_size(len(fleet.live), fleet.engine_ranks_per_actor)
            spec = self.learner.prepare_weights(self.transport, world_size)
            joins = [self.learner.join_weights(self.transport, spec), *fleet.join_group(self.transport, spec)]
            fleet.wait(joins, "sync (group formation)", dispatch=False)
        sends = self.learner.send_weights(self.transport)
        shipment = Shipment(version) if self.rendezvous else sends[0]
        receives = [m.handle.receive_weights.remote(self.transport, self.plan, shipment) for m in fleet.live]
        # Rank 0's shipment is awaited through the receives that depend on it (fetching it here
        # would copy the whole model into the driver), except for a rendezvous (it is tiny).
        senders = sends if self.rendezvous else sends[1:]
        reports = fleet.wait(receives + senders, "sync", dispatch=False)[: len(receives)]
        if any(r["policy_version"] != version for r in reports):
            raise RuntimeError(
                f"weight sync: engines report {[r['policy_version'] for r in reports]}, expected {version}"
            )
        return reports

    def catch_up(self, handle: Any) -> int:
        """Give one engine the learner's current weights (object store); returns their version."""
        transport = TRANSPORTS.get(CATCH_UP)
        sends = self.learner.send_weights(transport)
        receive = handle.receive_weights.remote(transport, self.plan, sends[0])
        report = ray.get([receive, *sends[1:]], timeout=self.timeout_s)[0]
        return int(report["policy_version"])


class SyncCheck:
    """trainer.verify_sync: proof that the update changed the weights and that the sync landed
    (two extra forward passes per step). Make it before the update; its `stats` go to metrics."""

    def __init__(self, learner: LearnerGroup, fleet: RolloutFleet, probe: list[int]) -> None:
        self.learner, self.fleet, self.probe = learner, fleet, probe
        self.digest = learner.param_digest()
        self.stats: dict[str, float] = {}

    def _diff(self) -> float:
        """Largest |engine - learner| logprob over the probe sequence (temperature 1)."""
        engine = np.array(self.fleet.prompt_logprobs(self.probe))
        learner = np.array(self.learner.sequence_logprobs(self.probe))
        return float(np.abs(engine - learner).max())

    def before_sync(self) -> None:
        self.stats["params_changed"] = float(self.digest != self.learner.param_digest())
        self.stats["sync_probe_diff_before"] = self._diff()

    def after_sync(self) -> None:
        self.stats["sync_probe_diff_after"] = self._diff()

    @contextmanager
    def around(self) -> Iterator[None]:
        """The measurements before and after the sync it wraps (outside the sync's own timer)."""
        self.before_sync()
        yield
        self.after_sync()
