"""The coverage of derived environments: build and baseline repositories at a release each.

    python bench/environments.py --git OWNER/NAME=CLONE@TAG [--git ...] [--json FILE] [--logs DIR] [--attempts 4]
        [reward.execution.cache_dir=DIR reward.execution.wall_s=900 ...]

Each repository at its tag goes the way `python -m data.inject` takes it: read from its clone
(data/bugs/repository.py: its sources and test files), its environment derived from what the
commit declares (reward/execution/derivation.py via data.inject's `git_sources`: each candidate
interpreter and requirement set built into the project's content-addressed cache,
reward.execution.cache_dir, and its baseline run once in the sandbox with the repository's own
test selection, until one counts; every attempt recorded). A second run finds every build in the
cache and only runs the tests. Prints one row per repository, as a Markdown table:

    repository  release  interpreter  built  tests collected  baseline pass rate  seconds  reason

`built` is whether some candidate's environment built; the pass rate is passed over passed,
failed and errors (skips are neither) in the chosen candidate's baseline; `seconds` is the whole
derivation, of which `build` the environments' builds (none when cached). A repository is
baselined when at least `--min-pass` (0.9) of its tests pass. The last line is
`environments: B of N built and baselined`. `--logs DIR`: each derivation's record as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from conf import logs, overrides  # noqa: E402
from conf.config import ExecutionConfig  # noqa: E402
from conf.errors import UserError  # noqa: E402
from data.bugs.injector import working_tree  # noqa: E402
from data.bugs.languages import sites  # noqa: E402
from data.bugs.repository import GitSource  # noqa: E402
from data.inject.__main__ import git_sources  # noqa: E402
from reward.execution.derivation import ATTEMPTS, Derivation, Deriver  # noqa: E402
from reward.execution.runner import Runner, TestJob  # noqa: E402


@dataclass(frozen=True)
class Row:
    repository: str
    release: str
    interpreter: str
    built: bool
    collected: int
    passed: int
    failed: int
    pass_rate: float | None
    seconds: float
    build_s: float
    reason: str

    def baselined(self, min_pass: float) -> bool:
        return self.built and self.pass_rate is not None and self.pass_rate >= min_pass


def parse_entry(entry: str) -> tuple[str, str, str]:
    """OWNER/NAME=CLONE@TAG as (name, clone, tag)."""
    name, sep, rest = entry.partition("=")
    clone, at, tag = rest.rpartition("@")
    if not sep or "/" not in name or not at or not clone or not tag:
        raise UserError(f"--git {entry!r}: not OWNER/NAME=CLONE@TAG")
    return name, clone, tag


def row_of(name: str, tag: str, derivation: Derivation, seconds: float, min_pass: float) -> Row:
    """A repository's row from its derivation: the chosen candidate's baseline, or why none counts."""
    record = derivation.record()
    counts: dict[str, int] = record["baseline"]
    ran = counts.get("passed", 0) + counts.get("failed", 0) + counts.get("error", 0)
    rate = counts.get("passed", 0) / ran if ran else None
    built = any(a.stage in ("ok", "baseline") for a in derivation.attempts)
    tried = len(derivation.attempts)
    if not derivation.ok:
        last = derivation.attempts[-1] if derivation.attempts else None
        reason = f"{last.stage}: {last.error}" if last else "no candidate"
    elif rate is not None and rate < min_pass:
        reason = f"{ran - counts.get('passed', 0)} of {ran} tests fail"
    else:
        reason = ""
    if tried > 1:
        reason = f"{tried} attempts ({record['requirements']} chosen)" + (f"; {reason}" if reason else "")
    return Row(
        name,
        tag,
        derivation.spec.python,
        built,
        sum(counts.values()),
        counts.get("passed", 0),
        ran - counts.get("passed", 0),
        rate,
        round(seconds, 1),
        record["seconds"]["build"],
        " ".join(reason.split())[:400],
    )


def baseline(
    entry: str, cfg: ExecutionConfig, deriver: Deriver, min_pass: float, logs_dir: Path | None = None
) -> tuple[Row, GitSource | None]:
    """One repository at its tag: derived as data.inject derives it (each candidate built, or
    found in the cache, and its baseline run, until one counts)."""
    name, clone, tag = parse_entry(entry)
    start = time.monotonic()
    try:
        (source,) = git_sources([f"{name}={clone}"], tag, (), cfg, "derive", deriver)
    except UserError as exc:
        return Row(name, tag, "", False, 0, 0, 0, None, round(time.monotonic() - start, 1), 0.0, str(exc)[:400]), None
    derivation = deriver.derivations[-1]
    if logs_dir is not None:  # the derivation's whole record: every attempt's error
        logs_dir.mkdir(parents=True, exist_ok=True)
        record = json.dumps(derivation.record(), indent=1)
        (logs_dir / f"{name.replace('/', '+')}@{tag}.json").write_text(record + "\n")
    return row_of(name, tag, derivation, time.monotonic() - start, min_pass), source


@dataclass(frozen=True)
class Sites:
    """Where the rules injector can draw on a repository: its mutation sites, and those on the
    lines its baseline's tests executed (one run measured by coverage.py in the sandbox)."""

    repository: str
    covered_lines: int
    sites: int
    on_covered: int


def sites_of(source: GitSource, runner: Runner) -> Sites | None:
    """One coverage run of the repository's baseline (in its derived environment, cached), and
    its mutation sites on every line and on the executed ones; None when the run gave no lines."""
    name = source.instance.repo
    run = runner.run(TestJob(source.instance, "", job_id=f"{name}/coverage", tests=source.tests, coverage=True))
    if not run.covered:
        return None
    tree = working_tree(source.instance)
    every = [m for path in sorted(tree) for m in sites(path, tree[path])]
    on = sum(m.line in run.covered.get(m.path, ()) for m in every)
    return Sites(name, sum(len(v) for v in run.covered.values()), len(every), on)


def table(rows: list[Row], min_pass: float) -> str:
    lines = [
        "| repository | release | interpreter | built | tests collected | baseline pass rate | seconds | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rate = f"{r.pass_rate:.1%}" if r.pass_rate is not None else "-"
        built = "yes" if r.built else "no"
        secs = f"{r.seconds:.0f}" + (f" (build {r.build_s:.0f})" if r.build_s else "")
        lines.append(
            f"| {r.repository} | {r.release} | {r.interpreter} | {built} | {r.collected} | {rate} | {secs} | "
            f"{r.reason.replace('|', '/')} |"
        )
    good = sum(r.baselined(min_pass) for r in rows)
    lines.append("")
    lines.append(f"environments: {good} of {len(rows)} built and baselined")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/environments.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--git", action="append", required=True, help="OWNER/NAME=CLONE@TAG (repeat)")
    parser.add_argument("--min-pass", type=float, default=0.9, help="share of its tests that must pass (0.9)")
    parser.add_argument("--attempts", type=int, default=ATTEMPTS, help=f"candidates tried at most ({ATTEMPTS})")
    parser.add_argument(
        "--sites", action="store_true", help="also: the injector's mutation sites on the lines the tests execute"
    )
    parser.add_argument("--json", default="", help="also write the rows as JSON here")
    parser.add_argument("--logs", default="", help="write each repository's derivation record here (every attempt)")
    # A whole suite in one run: training's 300 s per run is for a few test files.
    # `--git` is this script's own flag (the and bench/swebench_coverage.py's), not the
    # pool commands' former one: the overrides are parsed without the former-flag refusals.
    try:
        argv = sys.argv[1:] if argv is None else argv
        rest, typed = overrides.parse(argv, parser.prog, overrides.pool_sections(ExecutionConfig(wall_s=900.0)), {})
        cfg = overrides.check_pool(typed["reward"].execution)
        args = parser.parse_args(rest)
        entries = [parse_entry(e) for e in args.git]
    except UserError as exc:
        parser.error(str(exc))
    logs.setup()
    cfg = replace(cfg, repos=[*cfg.repos, *(f"{name}={clone}" for name, clone, _ in entries)])
    Runner(cfg).ready()
    deriver = Deriver(cfg, limit=args.attempts)
    rows, sources = [], []
    for (name, _clone, tag), entry in zip(entries, args.git, strict=True):
        row, source = baseline(entry, cfg, deriver, args.min_pass, Path(args.logs) if args.logs else None)
        rows.append(row)
        sources.append(source)
        r = rows[-1]
        print(f"[environments] {name}@{tag}: built={r.built} collected={r.collected} rate={r.pass_rate} "
              f"{r.seconds:.0f}s {r.reason[:200]}", file=sys.stderr, flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1))
    print(table(rows, args.min_pass))
    if args.sites:  # the share of the rules injector's sites that a test can see
        runner = Runner(cfg)
        print("\n| repository | lines executed | mutation sites | on executed lines |\n|---|---|---|---|")
        for source, r in zip(sources, rows, strict=True):
            found = sites_of(source, runner) if source is not None and r.baselined(args.min_pass) else None
            if found is not None:
                share = f"{found.on_covered} ({found.on_covered / max(found.sites, 1):.0%})"
                print(f"| {found.repository} | {found.covered_lines} | {found.sites} | {share} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
