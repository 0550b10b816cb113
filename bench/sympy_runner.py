"""sympy's own runner beside the harness's pytest, on validated sympy instances and given patches.

    python bench/sympy_runner.py --instances VALIDATED --git sympy/sympy=CLONE \
        [--rows ../shared/data/swebench_lite.json] --instance ID [--instance ID ...] \
        [--patches gold,SYSTEM,...] [--cache-dir /tmp/coverage/cache]

SWE-bench runs sympy's tests with `bin/test -C --verbose FILES` and reads its console; the
harness runs them with pytest under its recorder (reward/execution/runners.py). For each
instance and patch (`gold`, or a system named in the row's `resolved_by`; default: gold and
every such system) this runs, in one sandbox session over the instance's snapshot and
environment (reward/execution/runner.py: Runner.session; nothing runs on the host), the patch
and the test patch applied as a test run applies them:

    bin/test -C --verbose FILES     each test's status from its console line (bin_test_outcomes)

and the harness's own test run of the same patch (pytest, the verdict reward.execute gives).
Prints one JSON object per instance and patch: the labelled tests (FAIL_TO_PASS, PASS_TO_PASS,
bare names) that pass under one runner and not the other (and those that fail under both, in
different words: `error` there, `failed` here), the harness's verdict, and the tests
that a reader of only the lines ending " ok", " F" or " E" does not see (hidden_by_file_status:
the last test of each file, whose line ends with the file's `[OK]` or `[FAIL]`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conf.config import ExecutionConfig  # noqa: E402
from data.loader import read_instances  # noqa: E402
from data.schema import Instance  # noqa: E402
from reward.execution.environments import EnvSpec  # noqa: E402
from reward.execution.runner import Runner, TestJob, patched_files, test_files  # noqa: E402

# `test_name ok`, `test_name F`, `test_name E`, `test_name f` (expected failure), `test_name s`
# (skipped), `test_name X` (unexpected pass), `test_name w` (slow, skipped); the last test of a
# file carries the file's status after it: `test_name ok      [OK]`.
_LINE = re.compile(r"^(test_\w+)\s+(ok|F|E|f|s|X|w|T|K)(?:\s+\[(?:OK|FAIL)\])?\s*$")
_STATUS = {"ok": "passed", "F": "failed", "E": "error", "f": "xfailed", "X": "xpassed"}


def bin_test_outcomes(log: str) -> dict[str, str]:
    """Each test's outcome from `bin/test --verbose`'s console: bare name -> passed, failed,
    error, xfailed, xpassed, or skipped (s, w: slow, T: timed out, K: keyboard)."""
    out: dict[str, str] = {}
    for line in log.splitlines():
        if m := _LINE.match(line.strip()):
            out[m.group(1)] = _STATUS.get(m.group(2), "skipped")
    return out


def hidden_by_file_status(log: str) -> list[str]:
    """The tests whose console line ends with the file's `[OK]` or `[FAIL]` rather than with
    their own status: a parser that reads only lines ending " ok", " F" or " E" has no outcome
    for them, so labels made with it leave them out."""
    return [m.group(1) for line in log.splitlines() if (m := _LINE.match(line.strip())) and line.rstrip().endswith("]")]


def differences(native: dict[str, str], harness: dict[str, str], labelled: list[str]) -> dict[str, Any]:
    """The labelled tests that pass under one runner and not the other (labelled_differing: a
    verdict differs), and those that fail under both in different words (an exception other
    than an AssertionError is `error` under bin/test, `failed` under pytest: no verdict
    differs). Each test: [its outcome under bin/test, under the harness] ("missing": none)."""
    pairs = {t: [native.get(t, "missing"), harness.get(t, "missing")] for t in labelled}
    return {
        "labelled_differing": {t: p for t, p in pairs.items() if (p[0] == "passed") != (p[1] == "passed")},
        "labelled_failing_differently": {t: p for t, p in pairs.items() if "passed" not in p and p[0] != p[1]},
    }


def compare(inst: Instance, patch: str, runner: Runner, snapshot: Path, timeout_s: float) -> dict[str, Any]:
    """One patch under both runners (module docstring)."""
    files = test_files(inst.test_patch)
    with runner.session(inst) as session:
        session.write(patched_files(snapshot, patch, inst.test_patch or "")[0])
        ran = session.run(f"python bin/test -C --verbose {' '.join(files)}", timeout_s, 4 << 20)
    native = bin_test_outcomes(ran.output)
    harness = runner.run(TestJob(inst, patch, job_id=inst.instance_id))
    bare = {t.split("::")[-1]: o for t, o in harness.outcomes.items()}
    labelled = [t.split("::")[-1] for t in (*(inst.fail_to_pass or ()), *(inst.pass_to_pass or ()))]
    return {
        "bin_test_exit": ran.exit_code,
        "harness_status": harness.status,
        "harness_resolved": harness.resolved,
        "labelled": len(labelled),
        **differences(native, bare, labelled),
        "hidden_by_file_status": hidden_by_file_status(ran.output),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", required=True, help="data.validate output")
    parser.add_argument("--git", required=True, help="sympy/sympy=CLONE")
    parser.add_argument("--rows", default=str(ROOT.parent / "shared" / "data" / "swebench_lite.json"))
    parser.add_argument("--instance", action="append", required=True)
    parser.add_argument("--patches", default="", help="gold and/or resolved_by names (default: all)")
    parser.add_argument("--cache-dir", default="/tmp/coverage/cache")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    args = parser.parse_args(argv)
    rows = {r["instance_id"]: r for r in json.loads(Path(args.rows).read_text())}
    runner = Runner(ExecutionConfig(cache_dir=args.cache_dir, repos=[args.git], num_runners=1))
    wanted = {p for p in args.patches.split(",") if p}
    for inst in read_instances(args.instances, 0):
        if inst.instance_id not in args.instance:
            continue
        row = rows[inst.instance_id]
        patches = {"gold": row["golden_patch"], **{e["name"]: e["patch"] for e in row.get("resolved_by") or []}}
        snapshot = runner.snapshots.path(inst, EnvSpec.from_json(inst.environment) or EnvSpec())
        for name, patch in patches.items():
            if wanted and name not in wanted:
                continue
            result = compare(inst, patch, runner, snapshot, args.timeout_s)
            print(json.dumps({"instance_id": inst.instance_id, "patch": name, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
