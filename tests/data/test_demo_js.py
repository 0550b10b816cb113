"""The embedded JavaScript demo set (`demo-js`, data/demo/__init__.py): the committed Parquet file
matches its sources, the data path names it, every instance is a dependency-free CommonJS
package tested by node's own runner, its oracle patch turns code_context into
oracle_new_content exactly (under the project's strict applier and under `git apply`), and in
the sandbox its tests fail before the fix and pass after it, as its labels say.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conf.config import ExecutionConfig
from data import demo
from data.demo import __main__ as make
from data.loader import read_instances, resolve_path
from data.patching import apply_patch
from data.schema import FIELD_NAMES, Instance, files_to_dict, to_table, validate_instance
from reward.execution import sandbox
from reward.execution.environments import EnvSpec
from reward.execution.runner import Runner, TestJob
from tests.data.test_demo import MAX_PROMPT_CHARS, check_git_applies, check_patch_reproduces

JS = demo.DEMO_SETS["demo-js"]
ROWS = demo.load_demo_rows("demo-js")
IDS = [row["instance_id"] for row in ROWS]
ENVIRONMENT = EnvSpec(node="host", install="none", runner="node-test").to_json()
NODE_TEST_HEADER = "const { test, describe } = require('node:test');\nconst assert = require('node:assert');\n"


# ------------------------------------------------------------------ the set as a whole


def test_committed_parquet_matches_the_sources():
    fresh = make.build_table(JS).to_pylist()
    assert [r["instance_id"] for r in fresh] == IDS, "instances added or removed: run `python -m data.demo`"
    for old, new in zip(ROWS, fresh):
        for field in FIELD_NAMES:
            assert old[field] == new[field], f"{old['instance_id']}.{field} differs from data/demo/src_js"


def test_rebuild_is_byte_identical(tmp_path):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    make.write_parquet(make.build_table(JS), first)
    make.write_parquet(make.build_table(JS), second)
    assert first.read_bytes() == second.read_bytes()


def test_the_data_path_names_each_set_and_the_default_stays_python():
    assert resolve_path("demo-js") == JS.parquet == Path(demo.__file__).parent / "demo_js.parquet"
    assert resolve_path("demo") == demo.demo_parquet_path()
    instances = list(read_instances("demo-js", 0))
    assert [i.instance_id for i in instances] == IDS
    assert {i.environment for i in instances} == {ENVIRONMENT}
    assert {r["environment"] for r in demo.load_demo_rows()} == {EnvSpec().to_json()}


def test_set_size_and_spread_apart_from_the_python_set():
    assert 3 <= len(ROWS) <= 4 and len(set(IDS)) == len(IDS)
    names = {make.parse_instance_id(i)[0] for i in IDS}
    python_names = {make.parse_instance_id(r["instance_id"])[0] for r in demo.load_demo_rows()}
    assert len(names) == 2 and not names & python_names


def test_labels_go_to_the_set_that_holds_the_instance(tmp_path):
    py_src, js_src, validated = tmp_path / "py", tmp_path / "js", tmp_path / "validated"
    for d in (py_src / "demo__a-1", js_src / "demo__b-1", validated):
        d.mkdir(parents=True)
    rows = [dict(ROWS[0], instance_id=i, FAIL_TO_PASS=[f"{i}::t"]) for i in ("demo__a-1", "demo__b-1", "demo__c-1")]
    pq.write_table(to_table(rows), validated / "shard-00000.parquet")
    assert make.import_labels(validated, (py_src, js_src)) == 2
    labels = json.loads((js_src / "demo__b-1" / "tests.json").read_text())
    assert labels == {"FAIL_TO_PASS": ["demo__b-1::t"], "PASS_TO_PASS": ROWS[0]["PASS_TO_PASS"]}
    assert (py_src / "demo__a-1" / "tests.json").is_file() and not (py_src / "demo__b-1").exists()


# ------------------------------------------------------------------ each instance


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_instance_is_a_node_package_with_node_tests(row):
    validate_instance(row, where=row["instance_id"])
    title, _, body = row["problem_statement"].partition("\n\n")
    assert title and "\n" not in title and len(body) > 200
    assert row["environment"] == ENVIRONMENT
    context = files_to_dict(row["code_context"])
    package = json.loads(context["package.json"])
    assert package["name"] == make.parse_instance_id(row["instance_id"])[0] and package["private"] is True
    assert not {"dependencies", "devDependencies", "type"} & set(package), "CommonJS, no dependencies"
    assert len(row["problem_statement"]) + sum(map(len, context.values())) <= MAX_PROMPT_CHARS
    tests = apply_patch({}, row["test_patch"])
    assert tests and all(p.startswith("test/") and p.endswith(".test.js") for p in tests)
    assert all(NODE_TEST_HEADER in text for text in tests.values())
    assert row["FAIL_TO_PASS"], "tests.json: run data.validate, then `python -m data.demo --labels-from DIR`"
    assert {t.split("::")[0] for t in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]} <= set(tests)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_patch_reproduces_oracle_new_content(row):
    check_patch_reproduces(row)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_patches_apply_with_git(tmp_path):
    check_git_applies(ROWS, tmp_path)


@pytest.fixture(scope="module")
def sandbox_runs(tmp_path_factory) -> dict[tuple[str, str], object]:
    """Every instance's tests in the sandbox, on the base commit and with the oracle patch."""
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH (the set's environment is the machine's own node)")
    if (why := sandbox.available()) is not None:
        pytest.skip(f"sandbox unavailable: {why}")
    runner = Runner(ExecutionConfig(cache_dir=str(tmp_path_factory.mktemp("exec")), wall_s=60.0))
    runs = {}
    for row in ROWS:
        inst = Instance.from_row(row)
        for state, patch in (("before", ""), ("after", inst.patch)):
            runs[inst.instance_id, state] = runner.run(TestJob(inst, patch))
    return runs


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_tests_fail_before_and_pass_after_the_fix_in_the_sandbox(sandbox_runs, row):
    before, after = sandbox_runs[row["instance_id"], "before"], sandbox_runs[row["instance_id"], "after"]
    assert (before.status, after.status) == ("ok", "ok"), (before.reason, after.reason, after.log[-1500:])
    fail_to_pass, pass_to_pass = row["FAIL_TO_PASS"], row["PASS_TO_PASS"]
    assert {t: before.outcomes.get(t) for t in fail_to_pass} == dict.fromkeys(fail_to_pass, "failed")
    assert {t: after.outcomes.get(t) for t in fail_to_pass + pass_to_pass} == dict.fromkeys(
        fail_to_pass + pass_to_pass, "passed"
    )
    assert {t: before.outcomes.get(t) for t in pass_to_pass} == dict.fromkeys(pass_to_pass, "passed")
    assert (before.resolved, after.resolved) == (False, True)
