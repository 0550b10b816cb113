"""The Grafana dashboard generated from the exported gauges (actors/observe/dashboard.py): its JSON,
its coverage of the gauges, and where it is installed; and the exported gauges held to the keys
the code emits and to docs/metrics.md. Pure, no Ray cluster (the job test, tests/test_ray_job.py,
runs every query against a real Prometheus)."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from actors.observe.dashboard import FILE_NAME, PANELS, Panel, build, dashboards_dir, install
from actors.observe.telemetry import ACTOR_TOKENS_GAUGE, EXPORTED

ROOT = Path(__file__).resolve().parents[2]
METRICS_DOC = ROOT / "docs" / "metrics.md"

# The functions whose dictionaries become the step's metrics line (train.py's `merged(...)` in
# Trainer.train_step, and Trainer.fit's checkpoint phase): file -> qualified names.
SOURCES: dict[str, tuple[str, ...]] = {
    "train.py": ("Trainer.train_step", "Trainer.fit"),
    "actors/driver/run_log.py": ("step_metrics",),
    "learner/group.py": ("LearnerGroup.train", "combine_stats"),
    "learner/batch.py": ("padding_stats",),
    "actors/driver/weight_sync.py": ("SyncCheck.before_sync", "SyncCheck.after_sync"),
    "actors/rollout/fleet.py": ("RolloutFleet.metrics",),
    "actors/driver/reward_pool.py": ("RewardPool.__init__",),
    "reward/execution/pool.py": ("PoolCoordinator.__init__",),
    "actors/driver/dynamic_sampling.py": ("GroupSampler.sample",),
    "actors/driver/selfplay.py": ("SelfPlay.sample", "SelfPlay._verdicts"),
    "actors/driver/agent_metrics.py": ("agent_metrics",),
}
# What train_step merges besides dictionaries written in place, each read from SOURCES above.
MERGED = {
    "step_metrics(groups, scored, rewards, self.policy_version, timer.seconds, self.weights.nbytes)",
    "{k: round(v, 6) for k, v in stats.items()}",  # LearnerGroup.train
    "{k: round(v, 6) for k, v in check.stats.items()} if check else {}",  # SyncCheck
    "timer.seconds",  # the phases: every timer("<name>") of SOURCES' files is <name>_s
    "self.fleet.metrics()",
    "self.rewards.stats()",  # RewardPool's and the test-runner pool's counters
    "sampled",  # GroupSampler.sample's or SelfPlay.sample's counts
    "agent_metrics(groups)",
}


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    out = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for cls in (c for c in tree.body if isinstance(c, ast.ClassDef)):
        out |= {f"{cls.name}.{f.name}": f for f in cls.body if isinstance(f, ast.FunctionDef)}
    return out


def _keys(func: ast.FunctionDef, module: str) -> set[str]:
    """The metric keys a function writes: dict displays' string keys, `x["key"] = ...`,
    `.update(key=...)`, `for key in ("a", "b"): x[key] = ...`, and comprehensions whose keys are
    f-strings over module constants (evaluated in the module: f"agent_actions_{kind}" for kind in ACTIONS)."""
    keys: set[str] = set()
    loops = {  # loop variable -> the strings of the tuple it runs over
        n.target.id: [e.value for e in n.iter.elts if isinstance(e, ast.Constant)]
        for n in ast.walk(func)
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Tuple | ast.List)
    }
    for n in ast.walk(func):
        if isinstance(n, ast.Dict):
            keys |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            if isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                keys.add(n.slice.value)
            elif isinstance(n.slice, ast.Name) and n.slice.id in loops:
                keys |= set(loops[n.slice.id])
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "update":
            keys |= {kw.arg for kw in n.keywords if kw.arg}
        elif isinstance(n, ast.DictComp) and isinstance(n.key, ast.JoinedStr):
            listed = ast.Expression(ast.ListComp(elt=n.key, generators=n.generators))
            namespace = vars(importlib.import_module(module))
            keys |= set(eval(compile(ast.fix_missing_locations(listed), module, "eval"), dict(namespace)))
    return keys


def _phases(tree: ast.Module) -> set[str]:
    """`<name>_s` of every `timer("<name>")` (actors/observe/phases.py PhaseTimer)."""
    return {
        f"{n.args[0].value}_s"
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "timer"
        and n.args
        and isinstance(n.args[0], ast.Constant)
    }


def emitted() -> set[str]:
    """Every key the code writes into a step's metrics line, read from SOURCES."""
    out: set[str] = set()
    for path, names in SOURCES.items():
        tree = ast.parse((ROOT / path).read_text())
        module = path.removesuffix(".py").replace("/", ".")
        functions = _functions(tree)
        assert set(names) <= set(functions), f"{path}: {sorted(set(names) - set(functions))} not found"
        for name in names:
            out |= _keys(functions[name], module)
        out |= _phases(tree)
    return out


def _documented() -> set[str]:
    return {
        key
        for line in METRICS_DOC.read_text().splitlines()
        if line.startswith("| `")
        for key in re.findall(r"`([a-z_]+)`", line.split("|")[1])
    }


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


def test_train_step_merges_only_the_known_sources():
    """A new part of the metrics line must name the function that writes it in SOURCES."""
    step = _functions(ast.parse((ROOT / "train.py").read_text()))["Trainer.train_step"]
    (call,) = [n for n in ast.walk(step) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "merged"]
    parts = {ast.unparse(a) for a in call.args if not isinstance(a, ast.Dict)}
    assert parts == MERGED, "train_step merges a source this test does not read: add its function to SOURCES"


def test_every_key_the_code_emits_is_exported_and_no_other():
    keys = emitted()
    assert {"prove_s", "selfplay_bugs_valid", "selfplay_rejected_malformed", "agent_actions_bash", "loss"} <= keys
    assert keys - set(EXPORTED) == set(), "emitted but not exported (telemetry.EXPORTED) nor on the dashboard"
    assert set(EXPORTED) - keys == set(), "exported but emitted nowhere"
    assert len(EXPORTED) == len(set(EXPORTED))


def test_the_exported_gauges_are_the_metrics_table_of_the_docs():
    """docs/metrics.md's table is also held to what the runs log (tests/test_smoke.py,
    tests/test_selfplay.py). `rerun` is a boolean, not a gauge."""
    assert _documented() - {"rerun"} == set(EXPORTED)
    assert "rerun" in _documented()


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
