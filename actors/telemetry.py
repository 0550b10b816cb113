"""Training metrics exported through Ray's metrics system (ray.util.metrics).

Every numeric value of a step's metrics line becomes a gauge `swe_rl_<key>` (Ray prefixes
`ray_` on its Prometheus endpoint), tagged with the run name, so the Ray dashboard's Metrics
view and any Prometheus scraping the cluster show the same numbers as metrics.jsonl. Rollout
actors export their own generation throughput (`swe_rl_actor_gen_tokens_per_s`, tagged with
the actor id; actors/rollout.py).
"""

from __future__ import annotations

from typing import Any

from ray.util.metrics import Gauge


class Telemetry:
    def __init__(self, run: str) -> None:
        self.run = run
        self._gauges: dict[str, Gauge] = {}

    def record(self, metrics: dict[str, Any]) -> None:
        for key, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            gauge = self._gauges.get(key)
            if gauge is None:
                gauge = self._gauges[key] = Gauge(
                    f"swe_rl_{key}", description=f"metrics.jsonl field {key}", tag_keys=("run",)
                )
            gauge.set(float(value), tags={"run": self.run})
