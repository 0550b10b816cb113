"""cgroups.py on each layout (v1, v2, hybrid) and policy: caps set where the controllers are,
a refusal naming the cap, the host and the fix, best effort counted and warned once.

The v2 path runs against a folder laid out like a cgroup2 tree (cgroup.controllers,
cgroup.subtree_control): this machine binds memory and pids to v1, so the kernel's own v2 files
are not exercised here (docs/security.md says so)."""

from __future__ import annotations

import logging

import pytest

from reward.execution import cgroups, identity
from reward.execution.cgroups import BEST_EFFORT, ENFORCE, CapPolicy, CapsUnavailable, Hierarchy

V1 = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
"""
UNIFIED = "41 31 0:38 / {where} rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"


def test_the_layout_is_read_from_mountinfo(tmp_path):
    v1 = cgroups.hierarchy(V1)
    assert (v1.kind, v1.where("memory"), v1.where("pids")) == ("v1", "v1", "v1")
    assert str(v1.v1["memory"]) == "/sys/fs/cgroup/memory"
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    v2 = cgroups.hierarchy(UNIFIED.format(where=tmp_path))
    assert (v2.kind, v2.where("memory"), v2.where("pids"), v2.unified) == ("v2", "v2", "v2", tmp_path)
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")  # systemd's hybrid: controllers stay on v1
    hybrid = cgroups.hierarchy(V1 + UNIFIED.format(where=tmp_path))
    assert (hybrid.kind, hybrid.where("memory"), hybrid.where("pids")) == ("hybrid", "v1", "v1")
    assert cgroups.hierarchy("").kind == "none"


def _v2_tree(tmp_path, offered="cpu memory pids"):
    (tmp_path / "cgroup.controllers").write_text(offered + "\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    return Hierarchy("v2", {}, tmp_path, frozenset(offered.split()))


def test_v2_enables_the_controllers_down_the_path_and_writes_the_caps(tmp_path):
    (tmp_path / "ray").mkdir()
    run = cgroups.make(256, 64, CapPolicy(ENFORCE, "/"), _v2_tree(tmp_path / "ray", offered="memory pids"))
    assert run.v2 and run.uncapped is None and len(run.dirs) == 1
    parent = tmp_path / "ray" / cgroups.PARENT
    assert run.dirs[0].parent == parent
    assert (tmp_path / "ray" / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (run.dirs[0] / "memory.max").read_text() == str(256 << 20)
    assert (run.dirs[0] / "pids.max").read_text() == "64"
    assert run.procs() == [str(run.dirs[0] / "cgroup.procs")]
    (run.dirs[0] / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (run.dirs[0] / "cgroup.procs").write_text("")
    assert run.end() is True  # the OOM killer ran (memory.events), so the result says "memory"
    assert (run.dirs[0] / "cgroup.kill").read_text() == "1"


def test_v2_under_a_named_root(tmp_path):
    (tmp_path / "ray").mkdir()
    layout = _v2_tree(tmp_path)
    _v2_tree(tmp_path / "ray")
    run = cgroups.make(128, 32, CapPolicy(ENFORCE, "/ray"), layout)
    assert run.dirs[0].parent == tmp_path / "ray" / cgroups.PARENT
    assert (tmp_path / "cgroup.subtree_control").read_text() == ""  # the root's own is not touched


def test_a_cap_that_cannot_be_set_refuses_the_run_with_the_fix(tmp_path):
    layout = _v2_tree(tmp_path, offered="cpu pids")  # the memory controller not offered
    with pytest.raises(CapsUnavailable) as refused:
        cgroups.make(256, 64, CapPolicy(ENFORCE, "/"), layout)
    line = str(refused.value)
    assert "\n" not in line and line.startswith("sandbox: cannot cap memory")
    assert f"unified at {tmp_path} (cpu pids)" in line  # the host's cgroup state
    assert "reward.execution.cgroup_root" in line and "reward.execution.limits=best_effort" in line
    assert not (tmp_path / cgroups.PARENT).exists()  # nothing left behind


def test_best_effort_runs_uncapped_and_warns_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(cgroups, "_warned", False)
    layout = Hierarchy("none")
    with caplog.at_level(logging.WARNING, logger=cgroups.__name__):
        first = cgroups.make(256, 64, CapPolicy(BEST_EFFORT, "/"), layout)
        second = cgroups.make(256, 64, CapPolicy(BEST_EFFORT, "/"), layout)
    assert first.dirs == [] and first.procs() == []
    assert first.uncapped is not None and "no such controller" in first.uncapped
    assert second.uncapped == first.uncapped
    assert [r.message.count("test_uncapped") for r in caplog.records] == [1]  # once per process


def test_v1_makes_one_cgroup_per_controller(tmp_path):
    mounts = {c: tmp_path / c for c in cgroups.CONTROLLERS}
    for path in mounts.values():
        path.mkdir()
    run = cgroups.make(100, 10, CapPolicy(ENFORCE, "/delegated"), Hierarchy("v1", mounts))
    assert [d.relative_to(tmp_path).parts[:3] for d in run.dirs] == [
        ("memory", "delegated", cgroups.PARENT),
        ("pids", "delegated", cgroups.PARENT),
    ]
    assert (run.dirs[0] / "memory.limit_in_bytes").read_text() == str(100 << 20)
    assert (run.dirs[1] / "pids.max").read_text() == "10"


@pytest.mark.parametrize(
    ("variables", "problem"),
    [({"SWE_RL_LIMITS": "loose"}, "SWE_RL_LIMITS='loose'"), ({"SWE_RL_CGROUP_ROOT": "ray"}, "SWE_RL_CGROUP_ROOT")],
)
def test_a_bad_policy_names_the_variable(variables, problem):
    with pytest.raises(cgroups.PolicyError, match=problem):
        CapPolicy.from_env(variables)
    assert CapPolicy.from_env({}) == CapPolicy(ENFORCE, "/")
    assert CapPolicy.from_env({"SWE_RL_LIMITS": BEST_EFFORT, "SWE_RL_CGROUP_ROOT": "/ray"}) == CapPolicy(
        BEST_EFFORT, "/ray"
    )


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("user/max_user_namespaces", "0", "user.max_user_namespaces=0"),
        ("kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone=1"),
        ("kernel/apparmor_restrict_unprivileged_userns", "1", "apparmor_restrict_unprivileged_userns=0"),
    ],
)
def test_a_host_that_forbids_user_namespaces_is_named_with_its_fix(tmp_path, monkeypatch, name, value, says):
    monkeypatch.setattr(identity, "_userns_mounts", lambda: False)  # as under Ubuntu's restriction
    assert identity.forbidden(tmp_path) is None
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(value + "\n")
    assert says in (identity.forbidden(tmp_path) or "")
    if "apparmor" in name:  # a profile granting `userns` to unshare lifts it: namespaces that mount
        monkeypatch.setattr(identity, "_userns_mounts", lambda: True)
        assert identity.forbidden(tmp_path) is None
