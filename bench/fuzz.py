"""Fuzz `python -m reward.score`: hostile lines in, one well-formed record per line out, no crash.

    python bench/fuzz.py [--lines 10000] [--seed 0]

Writes a JSONL file of `--lines` lines, each a mutation of a valid line drawn from the demo set
(both kinds: model outputs and patch pairs): truncated at a random byte, random bytes flipped
(invalid UTF-8 included), fields dropped, retyped or added, JSON nested thousands deep, an
output of megabytes, adversarial SEARCH/REPLACE blocks (unterminated, repeated, empty), a
20k-line replacement against a small oracle (the trainer's time cap must catch it), and valid
lines. Then runs the command on it with 1 and 2 workers, in a fresh process each, and checks
that it exits 0 and writes exactly one record per input line, each with `id`, `reward` (null
or in [-1, 1]) and `error`. Prints lines per second for each and the ratio 2 workers / 1, the
counts per outcome, and the number of crashes (the goal: 0).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.demo import load_demo_rows  # noqa: E402
from data.schema import Instance  # noqa: E402
from reward import oracle_answer  # noqa: E402


def _valid_lines() -> list[dict]:
    lines = []
    for row in load_demo_rows():
        inst = Instance.from_row(row)
        answer = oracle_answer(inst.code_context, inst.oracle_new_content)
        lines.append(
            {
                "id": inst.instance_id,
                "code_context": inst.code_context,
                "oracle_new_content": inst.oracle_new_content,
                "output": answer,
            }
        )
        lines.append({"id": f"{inst.instance_id}/patch", "oracle_patch": inst.patch, "pred_patch": inst.patch})
    return lines


def _block(path: str, search: str, replace: str) -> str:
    return f"```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def mutate(rng: random.Random, base: dict, i: int) -> bytes:
    """One fuzzed line (bytes: some are not UTF-8)."""
    line = dict(base, id=f"f{i}")
    # The estimate-defeating kind (8) costs ~20 s a line even under the pair cap (the line
    # timeout's case): one line in a thousand, so that the throughput is the ordinary lines'.
    kind = 8 if rng.random() < 0.001 else rng.choice([k for k in range(12) if k != 8])
    if kind == 0:  # truncated JSON
        text = json.dumps(line).encode()
        return text[: rng.randrange(1, len(text))]
    if kind == 1:  # random bytes flipped
        raw = bytearray(json.dumps(line).encode())
        for _ in range(rng.randrange(1, 8)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw).replace(b"\n", b" ")
    if kind == 2:  # a field dropped
        line.pop(rng.choice(sorted(line)))
    elif kind == 3:  # a field retyped
        key = rng.choice(sorted(line))
        line[key] = rng.choice([None, 3, 2.5, True, [], {}, [1, 2], "x"])
    elif kind == 4:  # fields of the other kind added
        line.update({"pred_patch": "garbage", "extra": {"nested": [1, 2, 3]}})
    elif kind == 5:  # nested deeper than the recursion limit
        depth = rng.randrange(2000, 20000)
        return ("[" * depth + "]" * depth).encode()
    elif kind == 6 and "output" in line:  # a megabyte of output
        line["output"] = "<think>x</think><solution>" + "A" * rng.randrange(10**5, 2 * 10**6) + "</solution>"
    elif kind == 7 and "output" in line:  # unterminated and repeated blocks
        path = next(iter(line["code_context"]))
        body = "```python\n### " + path + "\n<<<<<<< SEARCH\n" * rng.randrange(1, 4000)
        line["output"] = f"<think>t</think><solution>{body}</solution>"
    elif kind == 8 and "output" in line:  # an edit that replaces a file with 20k lines
        path = next(iter(line["code_context"]))
        big = "\n".join(f"v{j} = {rng.random()}" for j in range(20000))
        line["output"] = f"<think>t</think><solution>{_block(path, '', big)}</solution>"
    elif kind == 9 and "output" in line:  # empty search against a missing file, search == replace
        line["output"] = f"<think>t</think><solution>{_block('no/such.py', 'a', 'a')}</solution>"
    elif kind == 10:  # not an object
        return json.dumps(rng.choice([[1, 2], "text", 7, None])).encode()
    return json.dumps(line).encode()


def check(out: Path, n: int) -> Counter[str]:
    """Outcome counts of the output; a line that breaks the contract counts as a crash."""
    counts: Counter[str] = Counter()
    records = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    counts["crash"] += abs(len(records) - n)
    for line in records:
        try:
            r = json.loads(line)
            ok = set(r) == {"id", "reward", "error"} and (r["reward"] is None or -1.0 <= r["reward"] <= 1.0)
        except ValueError:
            ok = False
        if not ok:
            counts["crash"] += 1
        elif r["reward"] is None:
            counts["bad line (reward null)"] += 1
        elif (r["error"] or "").startswith(("timeout:", "too large:")):
            counts["over the time cap"] += 1
        elif r["reward"] == -1.0:
            counts["malformed (-1)"] += 1
        else:
            counts["scored"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng, valid = random.Random(args.seed), _valid_lines()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "fuzz.jsonl"
        with open(src, "wb") as f:
            for i in range(args.lines):
                f.write(mutate(rng, rng.choice(valid), i) + b"\n")
        print(f"{args.lines} fuzzed lines, {src.stat().st_size / 2**20:.1f} MiB")
        rates = {}
        for workers in (1, 2):
            out = Path(tmp) / f"out{workers}.jsonl"
            cmd = [
                sys.executable,
                "-m",
                "reward.score",
                "--input",
                str(src),
                "--output",
                str(out),
                "--workers",
                str(workers),
            ]
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            counts = check(out, args.lines)
            counts["crash"] += proc.returncode != 0
            rates[workers] = args.lines / seconds
            print(
                f"{workers} worker(s): exit {proc.returncode}, {seconds:.1f} s, {rates[workers]:.0f} lines/s; "
                + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            )
        print(f"2 workers / 1: {rates[2] / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
