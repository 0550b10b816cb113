"""The Grafana dashboard generated from the exported gauges (actors/observe/dashboard.py): its JSON,
its coverage of the gauges, and where it is installed. Pure, no Ray cluster (the job test,
tests/test_ray_job.py, runs every query against a real Prometheus)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from actors.observe.dashboard import FILE_NAME, PANELS, Panel, build, dashboards_dir, install
from actors.observe.telemetry import ACTOR_TOKENS_GAUGE, EXPORTED

README = Path(__file__).resolve().parents[2] / "README.md"


def _gauges(expr: str) -> list[str]:
    return re.findall(r"\bray_(swe_rl_\w+)", expr)


def test_the_dashboard_is_json_with_unique_ids_and_a_query_per_gauge():
    dashboard = json.loads(json.dumps(build()))
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) == len(PANELS) + 1
    for p in panels:
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
    queried = [g for p in panels for t in p["targets"] for g in _gauges(t["expr"])]
    exported = {f"swe_rl_{k}" for k in EXPORTED} | {ACTOR_TOKENS_GAUGE}
    assert set(queried) == exported  # every query names an exported gauge, every gauge is shown
    assert len(queried) == len(exported)  # once
    assert all('run=~"$run"' in t["expr"] for p in panels[:-1] for t in p["targets"])
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "run"}


def test_the_issue_s_panels_are_there():
    titles = {p["title"] for p in build()["panels"]}
    for wanted in ("Reward", "Zero-signal groups", "Phase times", "Generation tokens/s", "Per-engine throughput"):
        assert wanted in titles
    shown = {t["legendFormat"] for p in build()["panels"] for t in p["targets"]}
    for key in ("format_error_rate", "staleness_max", "queue_depth", "sync_mb_per_s", "reward_actor_restarts"):
        assert key in shown


def test_a_gauge_left_off_the_panels_or_placed_twice_is_refused():
    with pytest.raises(ValueError, match=r"on no panel \['step'\]"):
        build(PANELS[:-1] + (Panel("Progress", "short", ("policy_version",), ""),))
    with pytest.raises(ValueError, match=r"twice \['loss'\]"):
        build(PANELS + (Panel("Again", "short", ("loss",), ""),))
    with pytest.raises(ValueError, match=r"not exported \['nope'\]"):
        build(PANELS + (Panel("New", "short", ("nope",), ""),))


def test_the_exported_gauges_are_the_readme_metrics_table():
    """The README's table is held to what a run logs (tests/test_smoke.py); this holds the
    dashboard's list to the table, without a run. `rerun` is a boolean, not a gauge."""
    table = README.read_text().split("### Metrics", 1)[1].split("\n#", 1)[0]
    documented = {
        key
        for line in table.splitlines()
        if line.startswith("| `")
        for key in re.findall(r"`([a-z_]+)`", line.split("|")[1])
    }
    assert documented - {"rerun"} == set(EXPORTED)
    assert len(EXPORTED) == len(set(EXPORTED))


def test_installed_where_ray_s_provisioning_reads(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR", raising=False)
    monkeypatch.delenv("RAY_METRICS_OUTPUT_ROOT", raising=False)
    session = tmp_path / "session_x"
    path = install(session)
    assert path == session / "metrics" / "grafana" / "dashboards" / FILE_NAME
    assert json.loads(path.read_text())["uid"] == "swe-rl-training"
    monkeypatch.setenv("RAY_METRICS_OUTPUT_ROOT", str(tmp_path / "root"))
    assert dashboards_dir(session) == tmp_path / "root" / "grafana" / "dashboards"
    monkeypatch.setenv("RAY_METRICS_GRAFANA_DASHBOARD_OUTPUT_DIR", str(tmp_path / "dash"))
    assert install(session) == tmp_path / "dash" / FILE_NAME
