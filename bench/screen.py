"""False alarms and speed of the static screen (reward/screen.py) on real fixes.

    python bench/screen.py [--data ../shared/data] [--repeat 5] [--show]

Every patch screened here is an honest fix, so every finding is a false alarm (the goal is 0):
- the gold patch of every instance of the demo sets (`demo`, `demo-js`), and each as the
  SWE-RL answer that rebuilds it (reward/oracle.py), screened as an answer's edits;
- SWE-bench Lite (swebench_lite.json): every `golden_patch` and every patch in `resolved_by`
  (other systems' fixes that passed the tests);
- swebench_dev_rows.json's patches; requests_lite.jsonl's patches, their `resolved_by`, and
  their oracle answers.
Sources that are absent are skipped with a line saying so.

Prints the patches screened per source, the findings per rule (each false alarm with its rule,
file and line under --show), and the speed: patches per second over the whole set, the best
of `--repeat` passes (one process, one core), against the same passes of what every judged
candidate pays anyway: parsing it (data.patching.parse_patch for a patch, reward.parse's
parse_output for an answer), as a ratio. The last line reads
`screen: N patches, F false alarms, P patches/s`. Before it, the seconds of three hostile 1 MB
lines (the screen's work is linear in the text).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.demo import DEMO_SETS, load_demo_rows  # noqa: E402
from data.patching import PatchError, parse_patch  # noqa: E402
from data.schema import files_to_dict  # noqa: E402
from reward.oracle import OracleAnswerError, oracle_answer  # noqa: E402
from reward.parse import Rejected, parse_output  # noqa: E402
from reward.screen import RULES, Finding, screen_answer, screen_patch  # noqa: E402

Item = tuple[str, str, Callable[[str], tuple[Finding, ...]]]  # (source, text, screen)
# One added line each, built to make a backtracking pattern quadratic (each took minutes before
# the scans were bounded).
HOSTILE = {
    "`open(` x 200,000": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n+" + "open(" * 200_000 + "\n",
    "`a.` x 500,000": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n+" + "a." * 500_000 + "\n",
    "`Object.assign(` x 70,000": "--- a/a.js\n+++ b/a.js\n@@ -1 +1 @@\n+" + "Object.assign(" * 70_000 + "\n",
}


def _answer(context: dict[str, str], new: dict[str, str]) -> str | None:
    try:
        return oracle_answer(context, new)
    except OracleAnswerError:
        return None


def items(data: Path) -> Iterator[Item]:
    for name in DEMO_SETS:
        for row in load_demo_rows(name):
            yield f"{name} gold", row["patch"], screen_patch
            answer = _answer(files_to_dict(row["code_context"]), files_to_dict(row["oracle_new_content"]))
            if answer:
                yield f"{name} oracle answers", answer, screen_answer
    lite = data / "swebench_lite.json"
    if lite.exists():
        for row in json.loads(lite.read_text()):
            yield "lite golden_patch", row["golden_patch"], screen_patch
            for solved in row["resolved_by"]:
                yield "lite resolved_by", solved["patch"], screen_patch
    else:
        print(f"skipped: {lite} is absent")
    dev = data / "swebench_dev_rows.json"
    if dev.exists():
        for row in json.loads(dev.read_text()):
            yield "dev rows patch", row["patch"], screen_patch
    else:
        print(f"skipped: {dev} is absent")
    requests = data / "requests_lite.jsonl"
    if requests.exists():
        for line in requests.read_text().splitlines():
            row = json.loads(line)
            yield "requests_lite patch", row["patch"], screen_patch
            for solved in row.get("resolved_by") or []:  # patches (text), unlike swebench_lite.json's
                yield "requests_lite resolved_by", solved, screen_patch
            answer = _answer(row["code_context"], row["oracle_new_content"])
            if answer:
                yield "requests_lite oracle answers", answer, screen_answer
    else:
        print(f"skipped: {requests} is absent")


def _parse(text: str, screen: Callable[[str], tuple[Finding, ...]]) -> object:
    """The baseline: the parse every judged candidate goes through anyway."""
    try:
        return parse_patch(text) if screen is screen_patch else parse_output(text)
    except (PatchError, Rejected):
        return None


def _best(passes: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes over the whole set (the best counts)")
    parser.add_argument("--show", action="store_true", help="print every false alarm")
    args = parser.parse_args()
    todo = list(items(args.data))
    per_source: Counter[str] = Counter(source for source, _, _ in todo)
    findings = [(source, f) for source, text, screen in todo for f in screen(text)]
    print(f"{'source':32} {'patches':>8} {'false alarms':>13}")
    alarms = Counter(source for source, _ in findings)
    for source, count in per_source.items():
        print(f"{source:32} {count:8d} {alarms[source]:13d}")
    by_rule = Counter(f.rule for _, f in findings)
    print("\nfindings per rule:", ", ".join(f"{r.id} {by_rule[r.id]}" for r in RULES))
    if args.show:
        for source, f in findings:
            print(f"  {source}: {f}")
    chars = sum(len(text) for _, text, _ in todo)
    screened = _best(args.repeat, lambda: [screen(text) for _, text, screen in todo])
    parsed = _best(args.repeat, lambda: [_parse(text, screen) for _, text, screen in todo])
    rate = len(todo) / screened
    print(
        f"\nspeed: {len(todo)} patches ({chars / 1e6:.2f} M characters) in {screened * 1e3:.0f} ms: "
        f"{rate:.0f} patches/s, {screened / len(todo) * 1e3:.2f} ms per patch; "
        f"{screened / parsed:.1f}x parsing them"
    )
    for name, hostile in HOSTILE.items():  # the cost grows with the text, never faster
        seconds = _best(1, partial(screen_patch, hostile))
        print(f"hostile: {name} ({len(hostile) / 1e6:.1f} M characters): {seconds:.2f} s")
    print(f"screen: {len(todo)} patches, {len(findings)} false alarms, {rate:.0f} patches/s")
    return 0 if not findings else 1


if __name__ == "__main__":
    sys.exit(main())
