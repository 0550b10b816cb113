"""cluster.yaml and the p5_512 preset, checked offline.

cluster.yaml goes through Ray's own cluster-config path: `prepare_config` (merges the AWS
provider's defaults.yaml, the setup commands and the per-type worker limits; it reads only
files inside Ray, no cloud call) and `validate_config` (the JSON schema Ray ships). The AWS
bootstrap that `ray up` runs next (IAM role, key pair, subnets, security group, AMI) needs
boto3 and credentials, so it is out of reach here; the tests check what it would consume.
What a node gives the test sandbox (user namespaces, the cgroup delegated to Ray's user, the
node check) is held against the sandbox's own names (identity.py, cgroups.py).

The preset is composed with Hydra exactly as `python train.py cluster=p5_512` does, validated
by conf.config.load, and its GPU split is held against both the cluster and its own comment.
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path, PurePosixPath

import jsonschema
import pytest
import yaml
from hydra import compose, initialize
from ray.autoscaler._private.util import prepare_config, validate_config

from conf import config
from reward.execution import cgroups, identity

REPO = Path(__file__).resolve().parent.parent
CLUSTER_YAML = REPO / "cluster.yaml"
PRESET_YAML = REPO / "conf" / "cluster" / "p5_512.yaml"

config.register()


def _raw() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def _prepared(raw: dict) -> dict:
    prepared = prepare_config(copy.deepcopy(raw))
    validate_config(prepared)
    return prepared


def _workers(cfg: dict) -> dict[str, dict]:
    return {name: t for name, t in cfg["available_node_types"].items() if name != cfg["head_node_type"]}


def _cluster_gpus(cfg: dict) -> int:
    return sum(t["min_workers"] * t["resources"].get("GPU", 0) for t in _workers(cfg).values())


# -- cluster.yaml ---------------------------------------------------------------------------


def test_ray_validates_the_cluster_yaml_and_it_describes_512_gpus():
    cfg = _prepared(_raw())
    workers = _workers(cfg)
    assert list(workers) == ["p5"]
    p5 = workers["p5"]
    assert p5["node_config"]["InstanceType"] == "p5.48xlarge"
    assert p5["min_workers"] == p5["max_workers"] == cfg["max_workers"] == 64
    assert p5["resources"] == {"CPU": 192, "GPU": 8}
    assert _cluster_gpus(cfg) == 512


def test_the_head_runs_no_training_work():
    cfg = _prepared(_raw())
    head = cfg["available_node_types"][cfg["head_node_type"]]
    # No schedulable CPU and no GPU: no actor or task can be placed on the head.
    assert head["resources"] == {"CPU": 0}
    assert head["max_workers"] == 0  # filled in by prepare_config: the head type is never scaled
    assert not head["node_config"]["InstanceType"].startswith(("p", "g"))


def test_the_dashboard_is_reachable_only_through_ssh():
    cfg = _prepared(_raw())
    head_start = " ".join(cfg["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in head_start
    # Security groups are given on every node, so Ray does not create its default group (which
    # opens SSH to the world), and the provider adds no rule of its own (e.g. for port 8265).
    assert "security_group" not in cfg["provider"]
    for name, node_type in cfg["available_node_types"].items():
        node = node_type["node_config"]
        groups = node.get("SecurityGroupIds") or [g for ni in node["NetworkInterfaces"] for g in ni["Groups"]]
        assert groups, f"{name}: no security group"


def test_workers_use_all_32_efa_interfaces_in_one_subnet_and_group():
    node = _prepared(_raw())["available_node_types"]["p5"]["node_config"]
    interfaces = node["NetworkInterfaces"]
    assert sorted(ni["NetworkCardIndex"] for ni in interfaces) == list(range(32))
    assert {ni["InterfaceType"] for ni in interfaces} == {"efa"}
    assert [ni["DeviceIndex"] for ni in interfaces if ni["NetworkCardIndex"] == 0] == [0]
    head = _raw()["available_node_types"]["head"]["node_config"]
    assert {ni["SubnetId"] for ni in interfaces} == set(head["SubnetIds"])
    assert {g for ni in interfaces for g in ni["Groups"]} == set(head["SecurityGroupIds"])
    # Ray refuses NetworkInterfaces next to node-level subnets or groups.
    assert not {"SubnetId", "SubnetIds", "SecurityGroupIds"} & node.keys()


def test_setup_installs_the_gpu_extra_on_python_311_and_shares_storage_and_token():
    cfg = _prepared(_raw())
    setup = "\n".join(cfg["setup_commands"])
    assert "--python 3.11" in setup
    assert re.search(r'pip install .*-e "\$HOME/swe-rl-ray\[gpu\]"', setup)
    assert "export RAY_AUTH_MODE=token" in setup
    assert re.search(r"mount -t lustre .* /fsx\)?$", setup, re.MULTILINE)
    # prepare_config merges the common commands into each node kind's list.
    assert cfg["head_setup_commands"][: len(cfg["setup_commands"])] == cfg["setup_commands"]
    assert any("boto3" in c for c in cfg["head_setup_commands"])
    assert cfg["file_mounts"] == {"~/swe-rl-ray": ".", "~/.ray/auth_token": "~/.ray/auth_token"}


def test_every_command_ray_runs_on_a_node_is_whole_bash():
    """Each command as YAML hands it to Ray is valid bash (`bash -n`): a plain scalar cut short by
    a " #" YAML took for a comment leaves a quote open, which only `ray up` would otherwise find."""
    cfg = _prepared(_raw())
    kinds = ("head_setup_commands", "worker_setup_commands", "head_start_ray_commands", "worker_start_ray_commands")
    for command in {c for kind in kinds for c in cfg[kind]}:
        proc = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert proc.returncode == 0, (command, proc.stderr)
    markers = [c for c in cfg["setup_commands"] if ">> ~/.bashrc" in c]
    assert len(markers) == 2 and all(re.search(r"grep -q (\S+) .*  # \1' >> ~/.bashrc$", c) for c in markers)


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda c: c.__setitem__("max_worker", c.pop("max_workers")), id="typo-top-level-key"),
        pytest.param(lambda c: c["available_node_types"]["p5"].__setitem__("min_worker", 64), id="typo-node-type-key"),
        pytest.param(
            lambda c: c["available_node_types"]["p5"]["resources"].__setitem__("GPU", "8"), id="gpu-count-as-string"
        ),
        pytest.param(lambda c: c["available_node_types"]["p5"]["resources"].__setitem__("GPU", -8), id="negative-gpus"),
        pytest.param(lambda c: c.__setitem__("max_workers", "64"), id="worker-count-as-string"),
        pytest.param(
            lambda c: c["provider"].__setitem__("security_group", {"GroupName": "x", "Ingress": []}),
            id="unknown-security-group-field",
        ),
    ],
)
def test_the_validator_rejects_a_broken_variant(break_it):
    raw = _raw()
    break_it(raw)
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(raw))


# -- the p5_512 preset ----------------------------------------------------------------------


def _preset() -> config.TrainConfig:
    with initialize(config_path="../conf", version_base=None):
        return config.load(compose("config", overrides=["cluster=p5_512"]))


def _stated_split() -> dict[str, int]:
    """The preset's own comment: '# GPU split: rollout E engines x G GPUs = R, learner N ranks x 1 GPU = L, total T of C'."""
    m = re.search(
        r"^# GPU split: rollout (\d+) engines x (\d+) GPUs = (\d+), learner (\d+) ranks x (\d+) GPU = (\d+), "
        r"total (\d+) of (\d+)$",
        PRESET_YAML.read_text(),
        re.MULTILINE,
    )
    assert m, "p5_512.yaml lost its '# GPU split: ...' comment line"
    keys = ("engines", "gpus_per_engine", "rollout", "ranks", "gpus_per_rank", "learner", "total", "cluster")
    return dict(zip(keys, map(int, m.groups()), strict=True))


def test_the_preset_composes_and_sets_the_paper_setting():
    cfg = _preset()
    assert (cfg.trainer.prompts_per_step, cfg.group_size, cfg.trainer.steps) == (32, 16, 1600)
    assert cfg.rollout.max_model_len == 16384
    assert cfg.data.max_prompt_tokens + cfg.rollout.max_new_tokens <= cfg.rollout.max_model_len
    assert (cfg.model.dtype, cfg.learner.zero_stage, cfg.learner.gradient_checkpointing) == ("bfloat16", 3, True)
    for path in (cfg.model.name, cfg.data.path, cfg.run_dir):
        assert path.startswith("/fsx/"), f"{path}: not on the shared storage that cluster.yaml mounts"
    assert cfg.ray.address == "auto"


def test_the_preset_gpu_split_fits_the_cluster_and_matches_its_comment():
    cfg, stated, cluster = _preset(), _stated_split(), _prepared(_raw())
    rollout_gpus = cfg.rollout.num_actors * cfg.rollout.num_gpus
    learner_gpus = cfg.learner.num_ranks * cfg.learner.num_gpus_per_rank
    assert (cfg.rollout.num_actors, cfg.rollout.num_gpus, rollout_gpus) == (
        stated["engines"],
        stated["gpus_per_engine"],
        stated["rollout"],
    )
    assert (cfg.learner.num_ranks, cfg.learner.num_gpus_per_rank, learner_gpus) == (
        stated["ranks"],
        stated["gpus_per_rank"],
        stated["learner"],
    )
    assert rollout_gpus + learner_gpus == stated["total"] <= stated["cluster"] == _cluster_gpus(cluster) == 512
    # An engine's TP workers use its actor's GPUs, which Ray gives from one node.
    gpus_per_node = cluster["available_node_types"]["p5"]["resources"]["GPU"]
    assert cfg.rollout.num_gpus == cfg.rollout.tensor_parallel_size <= gpus_per_node


def test_the_preset_fits_node_by_node():
    """Engines take whole nodes, learner ranks fill the rest 8 per node, and the CPUs each node
    is asked for stay within its 192 (reward actors go where CPUs are left)."""
    cfg, cluster = _preset(), _prepared(_raw())
    node = cluster["available_node_types"]["p5"]
    gpus, cpus, nodes = node["resources"]["GPU"], node["resources"]["CPU"], node["min_workers"]
    engines_per_node = gpus // cfg.rollout.num_gpus
    engine_nodes = -(-cfg.rollout.num_actors // engines_per_node)
    ranks_per_node = int(gpus // cfg.learner.num_gpus_per_rank)
    learner_nodes = -(-cfg.learner.num_ranks // ranks_per_node)
    assert engine_nodes + learner_nodes <= nodes
    assert engines_per_node * cfg.rollout.num_cpus <= cpus
    assert ranks_per_node * cfg.learner.num_cpus_per_rank <= cpus
    spare = engine_nodes * (cpus - engines_per_node * cfg.rollout.num_cpus) + learner_nodes * (
        cpus - ranks_per_node * cfg.learner.num_cpus_per_rank
    )
    assert cfg.reward.num_workers * cfg.reward.num_cpus <= spare
    # The busiest rank runs the step's rollouts in one micro-batch (ZeRO-3 gathers once), as the
    # preset's comment says; snake_order deals them at most ceil(rows / ranks) per rank.
    rows = cfg.trainer.prompts_per_step * cfg.group_size
    assert -(-rows // cfg.learner.num_ranks) == cfg.learner.micro_batch_size


# -- what the sandbox needs of a node (reward/execution/identity.py, cgroups.py, check.py) -----

CGROUP2 = "/sys/fs/cgroup"  # where Ubuntu 22.04 mounts the unified hierarchy (v2 only)


def _exported(setup: str, name: str) -> str:
    values = re.findall(rf"echo 'export {name}=(\S+)  # ", setup)
    assert len(values) == 1, f"{name}: exported {len(values)} times in the setup commands"
    return values[0]


def test_nodes_allow_the_sandbox_an_unprivileged_user_namespace(tmp_path):
    """Every sysctl identity.forbidden() reads as a refusal is set the other way, where it exists."""
    setup = _prepared(_raw())["setup_commands"]
    sets = dict(
        re.findall(r"^test ! -e /proc/sys/(\S+) \|\| sudo sysctl -w (\S+)$", c)[0] for c in setup if "sysctl" in c
    )
    assert sorted(sets) == ["kernel/apparmor_restrict_unprivileged_userns", "kernel/unprivileged_userns_clone"]
    # Each command tests the file of the sysctl it sets.
    assert all(setting.partition("=")[0] == path.replace("/", ".") for path, setting in sets.items())
    # A kernel with the most restrictive values of both, then what the setup writes: allowed.
    sysctl = tmp_path / "sys"
    (sysctl / "kernel").mkdir(parents=True)
    for path in sets:
        (sysctl / path).write_text("1\n" if "apparmor" in path else "0\n")
    assert identity.forbidden(sysctl) is not None
    for path, setting in sets.items():
        (sysctl / path).write_text(setting.partition("=")[2] + "\n")
    assert identity.forbidden(sysctl) is None


def test_ray_runs_in_a_child_of_the_cgroup_delegated_to_the_ssh_user_and_the_sandbox_is_told_its_name():
    cfg = _prepared(_raw())
    commands, user = cfg["setup_commands"], cfg["auth"]["ssh_user"]
    setup = "\n".join(commands)
    root = _exported(setup, cgroups.ROOT_ENV)
    assert cgroups.CapPolicy.from_env({cgroups.ROOT_ENV: root}).root == root == "/ray"
    assert cgroups.LIMITS_ENV not in setup  # enforce, the default: a node that cannot cap fails its check
    base, home = f"{CGROUP2}{root}", f"{CGROUP2}{root}/ray"  # the delegated cgroup; Ray's, a child of it
    assert f"sudo mkdir -p {home} " in setup
    chown = re.search(rf"sudo chown {user}:{user} (.+)$", setup, re.MULTILINE)
    files = ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")
    assert chown and chown.group(1).split() == [base, *(f"{base}/{f}" for f in files)]
    # The root offers the controllers the sandbox enables under `base` (cgroups.CONTROLLERS).
    enabled = re.search(rf'echo "([^"]+)" \| sudo tee {CGROUP2}/cgroup.subtree_control', setup)
    assert enabled and enabled.group(1).split() == [f"+{c}" for c in cgroups.CONTROLLERS]
    # v2's no-internal-process rule: the cgroup under which runs' cgroups are made holds no
    # process, so Ray lives in a child of it that is not the runs' own folder.
    assert home != base and PurePosixPath(home).name != cgroups.PARENT
    move = f'sudo sh -c "echo $BASHPID > {home}/cgroup.procs"'
    for kind in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = next(c for c in cfg[kind] if "ray start" in c)
        assert start.startswith(f"{move} || exit 1;"), kind
    # The check runs last, in Ray's cgroup (from there a run's PID 1 may join its cgroup).
    assert commands[-1] == f"{move} && cd ~/swe-rl-ray && python -m reward.execution.check"
    # The project is installed before the check runs, and the cgroup made before both.
    order = [
        next(i for i, c in enumerate(commands) if s in c)
        for s in ("sudo chown", "pip install", "reward.execution.check")
    ]
    assert order == sorted(order)
