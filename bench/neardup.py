"""MinHash + LSH libraries for the near-duplicate rule: rensa against datasketch, same process.

    python -m bench.neardup [--docs 2000] [--swebench ../shared/data/swebench_lite.json]

Needs datasketch (`pip install -e .[bench]`); the build itself uses rensa only.

Documents: the problem statements and patches of a SWE-bench file (default: the Lite file in
../shared/data when present, else the demo set), repeated with one word changed per copy until
there are --docs of them, so that every original has near-duplicates. Both libraries get the
same shingle sets (data/mining/neardup.py: instance_shingles, timed apart), 128 permutations and the
same LSH bands (data/mining/neardup.py: lsh_bands). Timed: signatures per second (each library's
batch call: rensa `RMinHash.update(list)`, datasketch `MinHash.bulk`), inserting all into an
LSH index, and one query per document (mean microseconds). Each figure is the best of
--repeats runs, since the machine is shared. Recall: the share of documents whose query finds
another one (every document has a near copy planted, so 100% is right).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasketch import MinHash, MinHashLSH
from rensa import RMinHash, RMinHashLSH

from data.mining.neardup import MINHASH_SEED, NUM_PERM, instance_shingles, lsh_bands
from data.mining.sources import iter_swebench_rows

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench_lite.json"


def documents(path: Path | None, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(problem statement, patch) pairs: the file's rows, then copies with one word changed."""
    if path is not None and path.is_file():
        rows = [(r["problem_statement"], r["patch"]) for _, r in iter_swebench_rows(path)]
    else:
        from data.demo import load_demo_rows

        rows = [(r["problem_statement"], r["patch"]) for r in load_demo_rows()]
    rng = random.Random(seed)
    docs = list(rows[:n])
    while len(docs) < n:
        statement, patch = rows[len(docs) % len(rows)]
        words = statement.split(" ")
        words[rng.randrange(len(words))] = "changed"
        docs.append((" ".join(words), patch))
    return docs


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def rensa_signatures(sets: list[list[str]]) -> list[RMinHash]:
    sigs = []
    for s in sets:
        m = RMinHash(NUM_PERM, MINHASH_SEED)
        m.update(s)
        sigs.append(m)
    return sigs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=2000, help="documents to sign and index")
    ap.add_argument("--swebench", default=str(SHARED), help="SWE-bench JSON file the documents come from")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    docs = documents(Path(args.swebench), args.docs)
    t_shingle, sets = _best(lambda: [list(instance_shingles(s, p)) for s, p in docs], 1)
    bytesets = [[x.encode() for x in s] for s in sets]
    bands = lsh_bands(args.threshold)
    mean = sum(map(len, sets)) / len(sets)
    print(f"{len(docs)} documents, {mean:.0f} shingles each on average; 128 permutations, {bands} bands")
    print(f"shingling (ours, shared): {len(docs) / t_shingle:,.0f} docs/s")

    def ds_sign() -> list[MinHash]:
        return MinHash.bulk(bytesets, num_perm=NUM_PERM, seed=MINHASH_SEED)

    def rs_sign() -> list[RMinHash]:
        return rensa_signatures(sets)

    results: dict[str, dict[str, float]] = {}
    for name, sign, new_lsh in (
        ("rensa", rs_sign, lambda: RMinHashLSH(args.threshold, NUM_PERM, bands)),
        ("datasketch", ds_sign, lambda: MinHashLSH(args.threshold, NUM_PERM, params=(bands, NUM_PERM // bands))),
    ):
        t_sign, sigs = _best(sign, args.repeats)

        def build(sigs: list[Any] = sigs, new_lsh: Callable[[], Any] = new_lsh) -> Any:
            lsh = new_lsh()
            for i, m in enumerate(sigs):
                lsh.insert(i, m)
            return lsh

        t_insert, lsh = _best(build, args.repeats)

        def query_all(lsh: Any = lsh, sigs: list[Any] = sigs) -> list[set[int]]:
            return [set(lsh.query(m)) for m in sigs]

        t_query, hits = _best(query_all, args.repeats)
        found = sum(1 for h in hits if len(h) > 1)  # every document has a planted near copy
        results[name] = {
            "sign": len(docs) / t_sign,
            "insert": t_insert,
            "query_us": 1e6 * t_query / len(docs),
            "with_candidates": found / len(docs),
        }
    for name, r in results.items():
        print(
            f"{name:<11}: {r['sign']:>9,.0f} signatures/s; LSH insert {r['insert'] * 1e3:6.1f} ms for all, "
            f"query {r['query_us']:6.1f} us each; {100 * r['with_candidates']:.1f}% of documents find another"
        )
    print(
        f"rensa/datasketch: signatures {results['rensa']['sign'] / results['datasketch']['sign']:.1f}x, "
        f"query {results['datasketch']['query_us'] / results['rensa']['query_us']:.1f}x"
    )


if __name__ == "__main__":
    main()
