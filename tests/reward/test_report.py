"""reward/execution/report.py: outcomes from the recorder's stream, and the canaries' check."""

from __future__ import annotations

import json

import pytest

from reward.execution.report import BadReport, Canaries, Tampered, parse, probed


def stream(*records: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def phases(test_id: str, **outcomes: str) -> list[dict]:
    return [{"id": test_id, "when": when, "outcome": outcome} for when, outcome in outcomes.items()]


def test_a_test_outcome_is_the_worst_of_its_phases() -> None:
    report = parse(
        stream(
            *phases("t.py::ok", setup="passed", call="passed", teardown="passed"),
            *phases("t.py::bad", setup="passed", call="failed", teardown="failed"),
            *phases("t.py::fixture", setup="failed", teardown="passed"),
            *phases("t.py::teardown", setup="passed", call="passed", teardown="failed"),
            *phases("t.py::skip", setup="skipped", teardown="passed"),
            {"id": "t.py::xfail", "when": "call", "outcome": "skipped", "xfail": True},
            {"id": "u.py", "when": "collect", "outcome": "failed", "message": "ImportError: x"},
            {"exit": 1},
        )
    )
    assert report.outcomes == {
        "t.py::ok": "passed",
        "t.py::bad": "failed",
        "t.py::fixture": "error",
        "t.py::teardown": "error",
        "t.py::skip": "skipped",
        "t.py::xfail": "skipped",
        "u.py": "error",
    }
    assert report.exit_code == 1 and report.ran and report.failures["u.py"] == "ImportError: x"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"<testsuites/>\n", "not JSON"),
        (b"[1, 2]\n", "not an object"),
        (stream({"nodeid": "t.py::x", "when": "call", "outcome": "passed"}), "not a test report"),
        (stream({"id": "t.py::x", "when": "call", "outcome": "won"}), "not a test report"),
        (stream(*phases("t.py::x", call="passed"), *phases("t.py::x", call="passed")), "its call twice"),
        (stream({"exit": 0}, *phases("t.py::x", call="passed")), "after the session's end"),
        # The coverage record is the tested code's to write: only safe paths and line numbers.
        (stream({"covered": {"../etc/passwd": [1]}}), "not a relative path inside the snapshot"),
        (stream({"covered": {"/testbed/a.py": [1]}}), "not a relative path inside the snapshot"),
        (stream({"covered": {"a.py": ["1"]}}), "not a list of line numbers"),
        (stream({"covered": {"a.py": [-1]}}), "not a list of line numbers"),
        (stream({"covered": [1, 2]}), "not a map"),
        (stream({"covered": {}}, {"covered": {}}), "a second coverage record"),
    ],
)
def test_a_stream_the_recorder_does_not_write_is_a_bad_report(data: bytes, why: str) -> None:
    with pytest.raises(BadReport, match=why):
        parse(data)


def test_the_coverage_record_gives_each_files_executed_lines() -> None:
    covered = {"pkg/a.py": [1, 2, 5], "pkg/__init__.py": [0]}  # line 0: an empty module
    report = parse(stream(*phases("t.py::ok", call="passed"), {"covered": covered}, {"exit": 0}))
    assert report.covered == {"pkg/a.py": frozenset({1, 2, 5}), "pkg/__init__.py": frozenset()}
    assert parse(stream({"exit": 0})).covered is None


def test_the_recorder_finds_hook_implementations_with_the_pluggy_of_2019() -> None:
    from reward.execution import bootstrap  # the sandbox's script, standard library only

    class Old:  # pluggy 0.8 (pytest 4.2): no get_hookimpls, the two lists
        _nonwrappers, _wrappers = ["a"], ["b"]

    class New:
        def get_hookimpls(self) -> list[str]:
            return ["c"]

    assert bootstrap._hookimpls(Old()) == ["a", "b"] and bootstrap._hookimpls(New()) == ["c"]
    assert bootstrap._hookimpls(None) == []


@pytest.fixture
def canaries() -> Canaries:
    return Canaries.beside(["tests/test_a.py"])


def honest(canaries: Canaries, *extra: dict) -> bytes:
    name = canaries.path
    records = [
        {"id": f"{name}{suffix}", "when": "call", "outcome": outcome} for suffix, outcome in canaries.expected.items()
    ]
    return stream(*extra, *records, {"exit": 1})


def test_canaries_sit_beside_the_tests_and_their_helper_on_the_import_path(canaries: Canaries) -> None:
    assert canaries.path.startswith("tests/test_") and "/" not in canaries.helper
    assert sorted(canaries.expected.values()) == ["failed", "failed", "passed", "passed"]
    assert any(s.count("::") == 2 for s in canaries.expected)  # the unittest.TestCase pair
    src = Canaries.beside(["src/pkg/tests/test_b.py"], "src")
    assert src.path.startswith("src/pkg/tests/test_") and src.helper.startswith("src/_")
    assert canaries.path != src.path  # fresh names every run


def test_an_honest_report_passes_the_check_without_its_canaries(canaries: Canaries) -> None:
    report = parse(honest(canaries, *phases("tests/test_a.py::t", call="passed")))
    assert canaries.check(report) == {"tests/test_a.py::t": "passed"}
    # Under another rootdir pytest writes the ids relative to it: found by file name.
    moved = parse(honest(canaries).replace(b"tests/", b""))
    assert canaries.check(moved) == {}


@pytest.mark.parametrize("forgery", ["all passed", "one missing", "unittest pair passed", "recorder saw it"])
def test_a_forged_report_is_tampered(canaries: Canaries, forgery: str) -> None:
    data = honest(canaries, *phases("tests/test_a.py::t", call="passed"))
    if forgery == "all passed":
        data = data.replace(b'"failed"', b'"passed"')
    elif forgery == "one missing":
        data = b"\n".join(line for line in data.splitlines() if next(iter(canaries.expected)) not in line.decode())
    elif forgery == "unittest pair passed":
        unit_bad = next(s for s, want in canaries.expected.items() if s.count("::") == 2 and want == "failed")
        data = data.replace(
            f'{unit_bad}", "when": "call", "outcome": "failed"'.encode(),
            f'{unit_bad}", "when": "call", "outcome": "passed"'.encode(),
        )
    else:
        data = stream({"tampered": "pytest's _pytest.runner:call_and_report was replaced"}) + data
    with pytest.raises(Tampered):
        canaries.check(parse(data))


def test_a_session_that_ran_no_test_is_not_checked(canaries: Canaries) -> None:
    report = parse(stream({"id": "tests/test_a.py", "when": "collect", "outcome": "failed"}, {"exit": 2}))
    assert not report.ran and canaries.check(report) == {"tests/test_a.py": "error"}


PASSED = phases("t.py::f2p", setup="passed", call="passed", teardown="passed")


@pytest.mark.parametrize(
    ("records", "why"),
    [
        ([{"probing": 1}, {"probe": "t.py::f2p", "found": "Yes == a fresh object() is true"}, *PASSED], "Yes =="),
        ([{"probing": 1}, *PASSED], "its probe wrote nothing"),  # the probe kept from writing
    ],
    ids=["finding", "silent"],
)
def test_a_watched_test_that_passed_with_a_finding_or_no_probe_line_is_tampered(records: list, why: str) -> None:
    with pytest.raises(Tampered, match=why):
        probed(parse(stream(*records, {"exit": 0})), ("t.py::f2p",))


def test_a_clean_probe_or_a_recorder_that_does_not_probe_passes() -> None:
    probed(parse(stream({"probing": 1}, {"probe": "t.py::f2p", "found": ""}, *PASSED, {"exit": 0})), ("t.py::f2p",))
    probed(parse(stream(*PASSED, {"exit": 0})), ("t.py::f2p",))  # no probing line: not this recorder's duty
    failed = phases("t.py::f2p", setup="passed", call="failed", teardown="passed")
    probed(parse(stream({"probing": 1}, *failed, {"exit": 1})), ("t.py::f2p",))  # a failure resolves nothing


@pytest.mark.parametrize(
    "records",
    [[{"probing": 1}, {"probing": 1}], [{"probe": "t.py::f2p", "found": ""}, {"probe": "t.py::f2p", "found": ""}]],
    ids=["probing-twice", "probe-twice"],
)
def test_a_probe_line_forged_ahead_of_the_real_one_is_a_bad_report(records: list) -> None:
    with pytest.raises(BadReport):
        parse(stream(*records, *PASSED, {"exit": 0}))
