"""Multi-SWE-bench JS rows (three real ones, trimmed: fixtures/multi_swe_bench_js.jsonl, from
kuppireddypravalika/MSWE-validation-dataset at f3788671, MSWE-agent/data/js/) -> SWE-bench rows,
Node EnvSpecs, and their labels mapped onto this project's test ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data import swebench_exec, swebench_js
from data.swebench_js import Label, map_labels, parse_label, resolve
from reward.execution.environments import EnvSpec

FIXTURE = Path(__file__).parent / "fixtures" / "multi_swe_bench_js.jsonl"
ROWS = {r["instance_id"]: r for r in map(json.loads, FIXTURE.read_text().splitlines())}


def test_a_row_becomes_swebench_fields_with_f2p_s2p_n2p_as_fail_to_pass():
    row = ROWS["iamkun__dayjs-2532"]
    assert swebench_js.is_multi_swe_bench(row)
    out = swebench_js.swebench_row(row)
    assert out["repo"] == "iamkun/dayjs"
    assert out["base_commit"] == "f4cb2cfd77246116cb4151c74ca2f600a17cd951"
    assert out["patch"] == row["fix_patch"] and out["test_patch"] == row["test_patch"]
    assert out["problem_statement"].startswith("Having some issues when use a timezone with zero offset")
    assert out["FAIL_TO_PASS"] == [
        "test/timezone.test.js",
        "test/timezone.test.js:TZ with Locale",
        "test/plugin.test.js",
        "test/locale/de.test.js",
    ]
    assert out["PASS_TO_PASS"][0] == "test/timezone.test.js:Add Time days (DST)"
    assert not swebench_js.is_multi_swe_bench(out)


def test_the_environment_is_the_harness_runner_and_node_on_the_lock_file():
    spec = swebench_js.environment("axios/axios", "2023-09-26T00:00:00Z")
    assert spec == EnvSpec(
        snapshot="git",
        node="20",
        install="lock",
        runner="mocha",
        network="loopback",
        exclude_newer="2023-09-26T00:00:00Z",
    )
    assert EnvSpec.from_json(spec.to_json()) == spec
    assert swebench_js.environment("iamkun/dayjs", None).runner == "jest"
    with pytest.raises(swebench_js.UnknownRepo, match="Kong/insomnia"):
        swebench_js.environment("Kong/insomnia", None)


def test_the_four_label_forms_parse():
    assert parse_label("test/timezone.test.js") == Label("test/timezone.test.js", None)
    assert parse_label("test/timezone.test.js:TZ with Locale") == Label("test/timezone.test.js", "TZ with Locale")
    title = ROWS["expressjs__express-3870"]["f2p_tests"]
    assert [parse_label(t) for t in title] == [Label(None, next(iter(title)))]
    assert parse_label("should detect adapter unavailable status: x") == Label(
        None, "should detect adapter unavailable status: x"
    )


REPORTED = [
    "test/timezone.test.js::TZ with Locale",
    "test/timezone.test.js::Diff (DST)",
    "test/utc.test.js::UTC > Diff (DST)",
    'test/app.render.js::app > .render(name, options, fn) > caching > when "cacheKey" option is given > should render the template twice with different keys',
    "test/unit/adapters/http.js::supports http with nodejs > should detect adapter unavailable status",
    "test/unit/a.js::A > should work",
    "test/unit/b.js::B > should work",
]


def test_labels_resolve_against_the_ids_a_run_reported():
    assert resolve("test/timezone.test.js", REPORTED) == [
        "test/timezone.test.js::Diff (DST)",
        "test/timezone.test.js::TZ with Locale",
    ]
    assert resolve("test/timezone.test.js:Diff (DST)", REPORTED) == ["test/timezone.test.js::Diff (DST)"]
    express = next(iter(ROWS["expressjs__express-3870"]["f2p_tests"]))
    assert resolve(express, REPORTED) == [REPORTED[3]]
    axios = next(iter(ROWS["axios__axios-5919"]["f2p_tests"]))
    assert resolve(axios, REPORTED) == [REPORTED[4]]
    # A bare title two tests share names neither; one no test has names nothing.
    assert resolve("should work", REPORTED) == []
    mapped = map_labels(["should work", "test/timezone.test.js:TZ with Locale", "test/gone.test.js"], REPORTED)
    assert mapped.ids == ["test/timezone.test.js::TZ with Locale"]
    assert mapped.unmapped == ["should work", "test/gone.test.js"]


def test_swebench_exec_reads_a_file_of_them_as_swebench_rows():
    rows = [row for _, row in swebench_exec.iter_rows([str(FIXTURE)])]
    assert [r["instance_id"] for r in rows] == list(ROWS)
    assert rows[0]["repo"] == "expressjs/express" and rows[0]["base_commit"].startswith("dc538f6e81")
