"""The work cap of rule 3 (reward/apply.py) against real answers, and the degenerate answer it stops.

    python bench/reward_work.py [--data ../shared/data] [--mirrors /work/.mirror] [--rewrites 300]

(1) The work (characters read plus written by `str.replace`, summed over an answer's edits,
    `reward.apply.WorkMeter`) of every real answer this machine can rebuild, as the oracle answer
    of its change (`reward.oracle_answer`: one SEARCH/REPLACE block per hunk, as a model writes):
    - the demo sets' oracle changes (data/demo, Python and JavaScript);
    - the psf/requests instances of the shared data (full code context): the oracle, and every
      `resolved_by` patch that applies to the context;
    - SWE-bench Lite's `golden_patch` and every `resolved_by` patch, for the repositories whose
      history is mirrored here (`fetch`; django, scikit-learn and matplotlib are too large to
      bring): the files each patch touches are read at the instance's base commit with git, the
      patch applied, and the change written as the oracle answer.
    Prints the count, the median and the largest work, and the cap's margin over the largest.
(2) The degenerate answer (`degenerate_answer`: doubling edits to 56 million characters, then
    whole-text rewrites), scored with the cap and with the cap lifted, in this process: CPU
    seconds and peak memory of each, and the ratio of the CPU seconds. The run without the cap
    takes a minute and a half of CPU (`--rewrites` makes it shorter).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import reward.core  # noqa: E402
from data.demo import DEMO_SETS, load_demo_rows  # noqa: E402
from data.patching import PatchError, apply_patch, parse_patch  # noqa: E402
from data.schema import Instance  # noqa: E402
from reward import OracleAnswerError, oracle_answer, score_output  # noqa: E402
from reward.apply import MAX_APPLY_WORK, apply_edits  # noqa: E402
from reward.parse import parse_output  # noqa: E402
from tests.reward.degenerate import DEGENERATE_CONTEXT, DEGENERATE_ORACLE, degenerate_answer  # noqa: E402

Files = dict[str, str]
LITE_UNAPPLIED: list[str] = []  # SWE-bench Lite patches that did not apply to the files read


def resolved_patches(row: dict[str, Any]) -> list[str]:
    """The `resolved_by` patches of a shared-data row (a list, or its repr in requests_lite)."""
    entries = ast.literal_eval(row["resolved_by"]) if isinstance(row["resolved_by"], str) else row["resolved_by"]
    return [entry["patch"] if isinstance(entry, dict) else entry for entry in entries or []]


def answer_work(context: Files, new_content: Files) -> int | None:
    """The work of the oracle answer of context -> new_content (None when it cannot be written)."""
    try:
        answer = oracle_answer(context, new_content)
    except OracleAnswerError:
        return None
    return apply_edits(context, parse_output(answer)).work


def demo_changes() -> Iterator[tuple[str, Files, Files]]:
    for name in DEMO_SETS:
        for row in load_demo_rows(name):
            inst = Instance.from_row(row)
            yield f"{name}:{inst.instance_id}", inst.code_context, inst.oracle_new_content


def requests_changes(data: Path) -> Iterator[tuple[str, Files, Files]]:
    with open(data / "requests_lite.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        context = row["code_context"]
        yield f"requests:{row['instance_id']}:oracle", context, row["oracle_new_content"]
        for number, patch in enumerate(resolved_patches(row)):
            try:
                yield f"requests:{row['instance_id']}:resolved{number}", context, apply_patch(context, patch)
            except PatchError:
                continue  # the alternative edits files outside the context


def _show(git_dir: Path, commit: str, path: str) -> str | None:
    done = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], capture_output=True, check=False)
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None


def lite_changes(data: Path, mirrors: Path) -> Iterator[tuple[str, Files, Files]]:
    with open(data / "swebench_lite.json", encoding="utf-8") as f:
        rows = json.load(f)
    for row in rows:
        git_dir = mirrors / row["repo"].replace("/", "+") / "repo"
        if not git_dir.is_dir():
            continue
        patches = [("golden", row["golden_patch"])] + [(f"resolved{i}", p) for i, p in enumerate(resolved_patches(row))]
        for label, patch in patches:
            try:
                paths = {fp.old_path or fp.new_path for fp in parse_patch(patch)}
                context = {p: text for p in paths if p and (text := _show(git_dir, row["base_commit"], p)) is not None}
                yield f"{row['instance_id']}:{label}", context, apply_patch(context, patch)
            except PatchError:
                LITE_UNAPPLIED.append(f"{row['instance_id']}:{label}")  # not at the base commit's files


def real_work(data: Path, mirrors: Path) -> None:
    works: list[tuple[int, str, int]] = []  # (work, label, largest file)
    skipped = 0
    sources = {
        "demo sets": demo_changes(),
        "requests": requests_changes(data),
        "SWE-bench Lite": lite_changes(data, mirrors),
    }
    for name, source in sources.items():
        count = 0
        for label, context, new_content in source:
            work = answer_work(context, new_content)
            if work is None:
                skipped += 1
                continue
            works.append((work, label, max(map(len, context.values()), default=0)))
            count += 1
        print(f"    {name}: {count} answers")
    works.sort()
    values = [w for w, _, _ in works]
    print(f"(1) work of {len(works)} real answers ({skipped} not writable as SEARCH/REPLACE, skipped):")
    print(f"    median {statistics.median(values):,.0f}  p99 {values[int(len(values) * 0.99)]:,}  largest:")
    for work, label, largest_file in works[-5:]:
        print(f"      {work:>12,}  {label}  (largest file {largest_file:,} characters)")
    if LITE_UNAPPLIED:
        print(f"    ({len(LITE_UNAPPLIED)} SWE-bench Lite patches did not apply to the base commit's files)")
    print(f"    cap MAX_APPLY_WORK = {MAX_APPLY_WORK:,}: {MAX_APPLY_WORK / values[-1]:,.0f} x the largest")


def degenerate(rewrites: int) -> None:
    answer = degenerate_answer(rewrites=rewrites)
    runs = {}
    for name, cap in (("with the cap", MAX_APPLY_WORK), ("cap lifted", 1 << 62)):
        with mock.patch.object(reward.core, "apply_edits", functools.partial(apply_edits, max_work=cap)):
            start = time.process_time()
            result = score_output(DEGENERATE_CONTEXT, DEGENERATE_ORACLE, answer, max_pair_seconds=10.0)
            runs[name] = time.process_time() - start
        # The peak so far: the run with the cap comes first, so its figure is its own.
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"    {name}: {runs[name]:.2f} s CPU, peak RSS {peak_mb:,.0f} MB  reward {result.reward:.3g}  "
            f"{(result.error or '')[:60]}"
        )
    print(
        f"(2) degenerate answer ({len(answer):,} characters, {rewrites} rewrites): cap lifted / with the cap = "
        f"x{runs['cap lifted'] / runs['with the cap']:.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="the shared real data directory")
    parser.add_argument("--mirrors", default="/work/.mirror", help="git mirrors as owner+name/repo")
    parser.add_argument("--rewrites", type=int, default=300, help="whole-text rewrites of the degenerate answer")
    args = parser.parse_args()
    data = Path(args.data)
    if not (data / "requests_lite.jsonl").is_file() or not (data / "swebench_lite.json").is_file():
        sys.exit(f"bench/reward_work.py: real data not found in {data} (requests_lite.jsonl, swebench_lite.json)")
    real_work(data, Path(args.mirrors))
    degenerate(args.rewrites)


if __name__ == "__main__":
    main()
