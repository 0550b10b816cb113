"""reward/execution/policy.py's audit hook: which uses of a capability are the candidate's.

An audit hook cannot be removed, so each case runs in a fresh interpreter with the hook on,
over a small repository whose `pkg/mod.py` the "candidate" changed on some lines only. The
sandboxed forgeries are in test_capabilities.py; these pin the attribution and its scope (no
false alarm for the standard library's own frame lookups, nor for unchanged code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reward.execution.runner import changed_lines

POLICY = Path(__file__).resolve().parents[2] / "reward" / "execution" / "policy.py"

MODULE = """\
import collections
import inspect
import logging
import sys


def unchanged_frame():
    return sys._getframe(1).f_code.co_name


def changed_frame():
    return sys._getframe(1).f_code.co_name


def changed_inspect():
    return inspect.stack()[1].function


def changed_logging():
    logging.getLogger("x").warning("a line")
    return collections.namedtuple("Pair", "a b")(1, 2)


def changed_traceback_text():
    import traceback

    try:
        raise ValueError("x")
    except ValueError:
        return traceback.format_exc()


def changed_reads_the_test():
    with open("tests/test_mod.py") as handle:
        return handle.read()


def changed_reads_data():
    with open("tests/data.txt") as handle:
        return handle.read()


def changed_trace():
    sys.settrace(None)


def changed_thread():
    import threading

    threading.Thread(target=sys._current_frames).start()


def changed_pool():
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(sys._current_frames).result()


def changed_warns():
    import warnings

    warnings.showwarning = warnings._showwarning_orig  # shown here, not captured
    warnings.warn("old", DeprecationWarning, stacklevel=2)
"""
CHANGED = [11, 12, 15, 16, 19, 20, 21, 24, 25, 26, 27, 28, 29, 30, 33, 34, 35, 38, 39, 40, 43, 44]
CHANGED += list(range(47, 66))

DRIVER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("swe_rl_policy", sys.argv[1])
policy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy)
found = []
hook = policy.AuditPolicy(1, lambda fd, record: found.append(record["tampered"]), ["pkg/mod.py"],
                          {"pkg/mod.py": json.loads(sys.argv[2])}, ["tests/test_mod.py"], "/swe-rl")
assert hook.install()
sys.path.insert(0, ".")
from pkg import mod
out = {}
sys.path.insert(0, "tests")
import test_mod
mod.warned_from_the_test = test_mod.test_x
for name in sys.argv[3:]:
    try:
        getattr(mod, name)()
        out[name] = "allowed"
    except policy.Refused:
        out[name] = "refused"
print(json.dumps({"results": out, "found": found}))
"""
# a caller in the test file, so that a warning at stacklevel=2 is shown with the test's line
CALLER = (
    "import warnings\nwarnings.simplefilter('always')\nfrom pkg import mod\n\ndef test_x():\n    mod.changed_warns()\n"
)


def run_cases(tmp_path: Path, *names: str) -> dict:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(MODULE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mod.py").write_text(CALLER)
    (tmp_path / "tests" / "data.txt").write_text("data\n")
    argv = [sys.executable, "-c", DRIVER, str(POLICY), json.dumps(CHANGED), *names]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_candidates_changed_code_reaching_for_a_capability_is_refused_and_named(tmp_path):
    names = ("changed_frame", "changed_inspect", "changed_reads_the_test", "changed_trace", "changed_thread")
    got = run_cases(tmp_path, *names, "changed_pool")
    assert set(got["results"].values()) == {"refused"}, got
    assert got["found"] == ["refused by policy: sys._getframe: pkg/mod.py:12 (changed_frame)"]  # the first only


def test_unchanged_code_and_the_standard_librarys_own_lookups_are_not_findings(tmp_path):
    names = (
        "unchanged_frame",
        "changed_logging",
        "changed_traceback_text",
        "changed_reads_data",
        "warned_from_the_test",
    )
    got = run_cases(tmp_path, *names)
    assert got == {"results": dict.fromkeys(names, "allowed"), "found": []}


def test_the_changed_lines_are_the_new_files_added_and_replaced_lines_and_where_lines_went():
    old = "a\nb\nc\nd\n"
    assert changed_lines(old, "a\nB\nc\nd\n") == [2]  # replaced
    assert changed_lines(old, "a\nb\nnew\nc\nd\n") == [3]  # added
    assert changed_lines(old, "a\nc\nd\n") == [2]  # removed: the line now standing there
    assert changed_lines("", "x\ny\n") == [1, 2]  # a new file: all of it
