"""One row of the SWE-bench Lite coverage table (docs/data.md): a repository's rows, end to end.

    python bench/swebench_coverage.py --repo pytest-dev/pytest --git pytest-dev/pytest=CLONE \
        [--rows ../shared/data/swebench_lite.json] [--ids ID,...] [--work DIR] [--limit N] [--workers 2]
        [--cache-dir DIR]

Runs the commands a user runs, in order, on the repository's rows of the export (no version,
test patch or labels in it: data.swebench_exec infers the version from the clone and takes the
test patch from the PR's head), and reads their manifests and reports:

    converted   python -m data.swebench_exec --rows ROWS --git ... --out WORK/converted
    kept        python -m data.validate --data WORK/converted --out WORK/validated reward.execution.repos=[...]
                (its run before the fix is the empty patch's: no kept instance resolves there)
    gold        python -m reward.execute --instances WORK/validated --predictions gold ...
                resolved, unresolved and errored out of run (an errored run named with its reason)
    official    the rows' `resolved_by` patches (each resolved under SWE-bench's own harness),
                one round per index, each with reward.execute: resolved here out of run, and
                every one not resolved named with its system and its labelled tests that did
                not pass (test -> outcome), or the reason its run errored

Every command runs with `reward.execution.cache_dir=--cache-dir` (default /tmp/coverage/cache,
shared by the repositories' runs: environments and snapshots are built once), never the
checkout's .cache. Prints the summary as JSON (also WORK/summary.json).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], log: Path) -> None:
    with log.open("w") as out:
        code = subprocess.call([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    if code != 0:
        raise SystemExit(f"{' '.join(args[:1])} failed ({code}): see {log}")


def _gold_patch(row: dict[str, Any]) -> str:
    """The row's gold patch: `patch` in SWE-bench's own rows (the dev rows), `golden_patch` in
    the Lite file's export (scripts/export_swebench_lite.py)."""
    return row["patch"] if "patch" in row else row["golden_patch"]


def _entries(row: dict[str, Any]) -> list[dict[str, str]]:
    value = row.get("resolved_by") or []
    return ast.literal_eval(value) if isinstance(value, str) else list(value)


def _execute(work: Path, name: str, predictions: list[dict[str, str]], pool: list[str]) -> dict[str, Any]:
    pred_path = work / f"{name}.json"
    pred_path.write_text(json.dumps(predictions))
    out = work / name
    args = ["reward.execute", "--instances", str(work / "validated"), "--predictions", str(pred_path)]
    _run([*args, "--out", str(out), *pool], work / f"{name}.log")
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def not_passed(labels: dict[str, Any], tests: dict[str, str]) -> dict[str, str]:
    """An instance's labelled tests (FAIL_TO_PASS, then PASS_TO_PASS) that did not pass in a
    run, each with its outcome there ("missing": the run did not report it)."""
    wanted = [*labels["FAIL_TO_PASS"], *labels["PASS_TO_PASS"]]
    return {t: tests.get(t, "missing") for t in wanted if tests.get(t) != "passed"}


def misses(
    predictions: list[dict[str, str]], report: dict[str, Any], logs: Path, labels: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every prediction run and not resolved: its system, and the labelled tests that did not
    pass (read from reward.execute's logs/<instance>.json) or the reason its run errored."""
    resolved, errors = set(report["resolved_ids"]), report["error_ids"]
    out: list[dict[str, Any]] = []
    for p in predictions:
        iid = p["instance_id"]
        if iid in resolved or iid in report["empty_patch_ids"] or iid in report["missing_instance_ids"]:
            continue
        entry: dict[str, Any] = {"instance_id": iid, "system": p["model_name_or_path"]}
        if iid in errors:
            entry["error"] = errors[iid]
        else:
            log = json.loads((logs / f"{iid}.json").read_text())
            entry["not_passed"] = not_passed(labels[iid], log["tests"])
        out.append(entry)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--git", action="append", required=True, help="owner/name=CLONE")
    parser.add_argument("--rows", default=str(ROOT.parent / "shared" / "data" / "swebench_lite.json"))
    parser.add_argument("--ids", default="", help="these instance ids only (comma-separated)")
    parser.add_argument("--work", default=None, help="default: /tmp/coverage/OWNER+NAME")
    parser.add_argument("--cache-dir", default="/tmp/coverage/cache", help="environments and snapshots")
    parser.add_argument("--limit", type=int, default=0, help="the first N rows only (a sample)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    work = Path(args.work or f"/tmp/coverage/{args.repo.replace('/', '+')}")
    work.mkdir(parents=True, exist_ok=True)
    ids = {i for i in args.ids.split(",") if i}
    rows = [r for r in json.loads(Path(args.rows).read_text()) if r["repo"] == args.repo]
    rows = [r for r in rows if r["instance_id"] in ids] if ids else rows
    rows = rows[: args.limit] if args.limit else rows
    if not rows:
        parser.error(
            f"--rows {args.rows}: no row of repository {args.repo!r}" + (f" among --ids {args.ids}" * bool(ids))
        )
    (work / "rows.json").write_text(json.dumps(rows))
    git = [x for g in args.git for x in ("--git", g)]  # data.swebench_exec's clones
    pool = [  # the test-pool commands' (conf/overrides.py)
        f"reward.execution.repos=[{','.join(repr(g) for g in args.git)}]",
        f"reward.execution.cache_dir={Path(args.cache_dir).expanduser().resolve()}",
        f"reward.execution.num_runners={args.workers}",
    ]
    start, summary = time.monotonic(), {"repo": args.repo, "rows": len(rows)}
    _run(["data.swebench_exec", "--rows", str(work / "rows.json"), *git, "--out", str(work / "converted"),
          "--overwrite"], work / "convert.log")  # fmt: skip
    converted = json.loads((work / "converted" / "_manifest.json").read_text())
    summary.update(converted=converted["instances"], convert_counts=converted["counts"], notes=converted["notes"])
    _run(["data.validate", "--data", str(work / "converted"), "--out", str(work / "validated"), *pool,
          "--overwrite"], work / "validate.log")  # fmt: skip
    validated = json.loads((work / "validated" / "_manifest.json").read_text())
    summary.update(kept=validated["kept"], validate_counts=validated["counts"], validate_examples=validated["examples"])
    labels = {
        d["instance_id"]: d
        for d in json.loads((work / "validated" / "_labels.json").read_text())
        if d["outcome"] == "kept"
    }
    kept = set(labels)
    by_id = {r["instance_id"]: r for r in rows}
    gold = [{"instance_id": i, "model_name_or_path": "gold", "model_patch": _gold_patch(by_id[i])} for i in kept]
    report = _execute(work, "gold", gold, pool)
    summary.update(
        gold_run=report["submitted"],
        gold_resolved=report["resolved"],
        gold_unresolved=report["unresolved"],
        gold_error=report["error"],  # a run that errored is counted, not dropped from the total
        gold_misses=misses(gold, report, work / "gold" / "logs", labels),
    )
    rounds = max((len(_entries(by_id[i])) for i in kept), default=0)
    official: dict[str, Any] = {"run": 0, "resolved": 0, "error": 0, "not_resolved": [], "of_rows_not_kept": 0}
    official["of_rows_not_kept"] = sum(len(_entries(r)) for r in rows if r["instance_id"] not in kept)
    for k in range(rounds):
        preds = [
            {
                "instance_id": i,
                "model_name_or_path": _entries(by_id[i])[k]["name"],
                "model_patch": _entries(by_id[i])[k]["patch"],
            }
            for i in sorted(kept)
            if len(_entries(by_id[i])) > k
        ]
        report = _execute(work, f"official-{k}", preds, pool)
        official["run"] += len(preds)
        official["resolved"] += report["resolved"]
        official["error"] += report["error"]
        official["not_resolved"] += misses(preds, report, work / f"official-{k}" / "logs", labels)
    summary["official"] = official
    summary["seconds"] = round(time.monotonic() - start, 1)
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
