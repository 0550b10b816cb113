"""SWE-RL's Table 3 and its reward ablation, the paper's numbers beside ours.

    python bench/paper_table.py --runs base=runs/ood_base sft=runs/ood_sft rl=runs/ood_rl
    python bench/paper_table.py --runs rl=runs/ood_rl --ablation similarity=runs/eval_sim discrete=runs/eval_disc

`--runs NAME=DIR`: summary.json files of `python -m actors.evaluate mode=ood` (one column each,
in the order given; a run may hold any of the suites). `--ablation KIND=DIR`: summary.json
files of the default evaluation (`mode=oracle_context`, the model handed the oracle's files) of
models trained with each reward kind; its rows are the paper's section 3.6 (repair with oracle
files: our tests' resolve rate where the instances carry tests, else the exact-match rate, and
says which; format rate: answers that pass the format rules).

The paper's columns are Llama-3.3-70B-Instruct, its SFT baseline and SWE-RL-70B (Wei et al. 2025,
Table 3, zero-shot greedy pass@1 in %); a dash where this file does not record the paper's value.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# suite -> (the paper's row name, base, SFT, RL); None where not recorded here.
PAPER: dict[str, tuple[str, float | None, float | None, float | None]] = {
    "humaneval_plus": ("HumanEval+", 76.2, 73.2, 79.9),
    "mbpp_plus": ("MBPP+", None, None, None),
    "cruxeval_i": ("CRUXEval-I", 60.5, None, 71.6),
    "cruxeval_o": ("CRUXEval-O", 61.9, None, 75.5),
    "math": ("MATH (strict)", 63.2, 54.0, 73.7),
    "mmlu": ("MMLU", 86.49, None, 86.82),
    "humaneval": ("HumanEval (not in the paper)", None, None, None),
}
# Section 3.6: kind -> (repair with oracle files, format rate), in %.
PAPER_ABLATION = {"similarity": (34.8, 95.6), "discrete": (29.0, 94.2)}


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pairs(items: list[str], flag: str) -> list[tuple[str, Path]]:
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"{flag} {item!r}: expected NAME=DIR")
        file = Path(path) / "summary.json" if Path(path).is_dir() else Path(path)
        if not file.is_file():
            raise SystemExit(f"{flag} {item!r}: no summary.json at {file}")
        out.append((name, file))
    return out


def table3(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    names = [n for n, _ in runs]
    lines = [
        "| suite | paper: base | paper: SFT | paper: RL | " + " | ".join(f"ours: {n}" for n in names) + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    suites = [s for s in PAPER if any(s in summary.get("suites", {}) for _, summary in runs)]
    for suite in suites:
        row, *paper = PAPER[suite]
        ours = []
        for _, summary in runs:
            s = summary.get("suites", {}).get(suite)
            if s is None or "score" not in s:
                ours.append("—")
                continue
            cell = f"{100 * s['score']:.1f} ± {100 * s['stderr']:.1f}"
            if "lenient" in s.get("also", {}):
                cell += f" (lenient {100 * s['also']['lenient']:.1f})"
            ours.append(f"{cell} (n={s['problems']})")
        digits = 2 if suite == "mmlu" else 1
        lines.append(f"| {row} | " + " | ".join(_pct(v, digits) for v in paper) + " | " + " | ".join(ours) + " |")
    return lines


def ablation(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = [
        "| reward | paper: repair with oracle files | paper: format | ours: repair with oracle files | ours: format |",
        "|---|---|---|---|---|",
    ]
    for kind, summary in runs:
        greedy = summary.get("greedy", {})
        tests = summary.get("tests", {})
        if "resolve_rate" in tests:
            repair = f"{100 * tests['resolve_rate']:.1f} (resolved)"
        else:
            repair = f"{100 * greedy.get('exact_match_rate', 0.0):.1f} (exact match: no tests)"
        paper = PAPER_ABLATION.get(kind, (None, None))
        ours_format = f"{100 * greedy.get('format_rate', 0.0):.1f}"
        lines.append(f"| {kind} | {_pct(paper[0])} | {_pct(paper[1])} | {repair} | {ours_format} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="*", default=[], metavar="NAME=DIR", help="mode=ood summaries, one column each")
    parser.add_argument(
        "--ablation", nargs="*", default=[], metavar="KIND=DIR", help="oracle_context summaries by kind"
    )
    args = parser.parse_args(argv)
    if not args.runs and not args.ablation:
        parser.error("give --runs and/or --ablation")
    load = lambda pairs: [(n, json.loads(f.read_text())) for n, f in pairs]  # noqa: E731
    if args.runs:
        print("\n".join(table3(load(_pairs(args.runs, "--runs")))))
    if args.ablation:
        print()
        print("\n".join(ablation(load(_pairs(args.ablation, "--ablation")))))


if __name__ == "__main__":
    main()
