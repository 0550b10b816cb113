"""Test outcomes from a pytest JUnit XML report, keyed by pytest node id. No log regexes.

pytest writes the report itself (`--junitxml`, built in, nothing to install in the tested
environment). With `junit_family=xunit1` each <testcase> carries `file` (the test file,
relative to the rootdir), `classname` (the module's dotted path, then any classes) and `name`
(the function, with its parametrisation), from which the node id is rebuilt exactly as
SWE-bench writes FAIL_TO_PASS/PASS_TO_PASS: `tests/test_a.py::TestX::test_y[1]`.

Outcome of a test case: "failed" if it has <failure>, "error" if <error> (a fixture or the
collection broke), "skipped" if <skipped> (an expected failure counts as skipped), else
"passed". Only "passed" counts as passing.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

# --tb=line: one line per failure on the console (the report has the whole traceback); a real
# suite's hundreds of full tracebacks (requests' network tests in the sandbox) pass the output cap.
PYTEST_ARGS = ("-o", "junit_family=xunit1", "-p", "no:cacheprovider", "-q", "-rN", "--tb=line")


def node_id(case: ET.Element) -> str:
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    if not file:  # xunit2 or a collection error without a file: best effort from the classname
        return f"{classname.replace('.', '/')}.py::{name}" if classname else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else file.replace("/", ".")
    classes = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    return "::".join([file, *filter(None, classes.split(".")), name])


def outcomes(xml: bytes | str) -> dict[str, str]:
    """node id -> "passed" | "failed" | "error" | "skipped"; ValueError on a report that is not XML."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ValueError(f"not a JUnit XML report ({exc})") from None
    result: dict[str, str] = {}
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        status = (
            "failed"
            if "failure" in tags
            else "error"
            if "error" in tags
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        key = node_id(case)
        # A test that passed and then errored in teardown appears twice: the worse outcome wins.
        if result.get(key) in (None, "passed"):
            result[key] = status
    return result


def failures(xml: bytes | str, limit: int = 200, chars: int = 240) -> dict[str, str]:
    """node id -> the first line of the failure or error message, for the first `limit` tests
    that did not pass (why a test fails: a network error, an import error, an assertion)."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return {}
    result: dict[str, str] = {}
    for case in root.iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error") and len(result) < limit:
                text = (child.get("message") or child.text or "").strip()
                result.setdefault(node_id(case), text.splitlines()[0][:chars] if text else child.tag)
    return result
