"""The rules injector's mutation sites on repositories at a commit: how many, of which operator,
and how long listing them takes (every site is parsed once mutated, so this is the draw's cost).

    python -m bench.mutation_sites OWNER/NAME=CLONE [OWNER/NAME=CLONE ...] [--commit HEAD] [--paths src/pkg]

Each repository is read as `python -m data.inject` reads it (data/bugs/repository.py: its
language, its sources outside tests, build output and tooling), and every source is listed by its
language's rules (data/bugs/languages.py). One Markdown row per repository; the seconds are the
listing alone, one process, best of --repeats.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from data.bugs.languages import language_of, sites
from data.bugs.mutations import OPERATORS
from data.bugs.repository import read_source


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("repos", nargs="+", help="OWNER/NAME=CLONE")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--paths", nargs="*", default=[], help="source prefixes (a monorepo's package)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    head = ["repository", "language", "source files", "files with sites", "sites", "seconds", *OPERATORS]
    print("| " + " | ".join(head) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(OPERATORS))
    for spec in args.repos:
        name, _, clone = spec.partition("=")
        source = read_source(name, Path(clone), args.commit, tuple(args.paths))
        code = source.instance.code_context
        best, found = float("inf"), []
        for _ in range(args.repeats):
            start = time.perf_counter()
            found = [m for path in sorted(code) for m in sites(path, code[path])]
            best = min(best, time.perf_counter() - start)
        ops = Counter(m.operator for m in found)
        languages = sorted({language_of(path) or "?" for path in code})
        with_sites = len({m.path for m in found})
        cells = [name, "+".join(languages), str(len(code)), str(with_sites), f"{len(found):,}", f"{best:.2f}"]
        print("| " + " | ".join(cells + [str(ops[op]) for op in OPERATORS]) + " |", flush=True)


if __name__ == "__main__":
    main()
