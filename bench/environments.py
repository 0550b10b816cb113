"""The coverage of derived environments: build and baseline repositories at a release each.

    python bench/environments.py --git OWNER/NAME=CLONE@TAG [--git ...] [--json FILE]
        [reward.execution.cache_dir=DIR reward.execution.wall_s=900 ...]

Each repository at its tag goes the way `python -m data.inject` takes it: read from its clone
(data/bugs/repository.py: its sources and test files), its environment derived from what the
commit declares (reward.execution.environments.derive_spec, via data.inject's `git_sources`),
built into the project's content-addressed cache (reward.execution.cache_dir; a second run finds
it there and builds nothing), and its own test files run once, in the sandbox, as the
injector's baseline runs them (reward.execution.runner: the guard, the canaries, the report
stream). Prints one row per repository, as a Markdown table:

    repository  release  interpreter  built  tests collected  baseline pass rate  seconds  reason

`built` is whether the environment built and pytest reported a session; the pass rate is passed
over passed, failed and errors (skips are neither); `seconds` is the environment's build (0 when
cached) plus the run. A repository is baselined when at least `--min-pass` (0.9) of its tests
pass. The last line is `environments: B of N built and baselined`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from conf import logs, overrides  # noqa: E402
from conf.config import ExecutionConfig  # noqa: E402
from conf.errors import UserError  # noqa: E402
from data.inject.__main__ import git_sources  # noqa: E402
from reward.execution.environments import EnvSpec  # noqa: E402
from reward.execution.runner import Runner, TestJob, TestRun  # noqa: E402

BUILD_FAILURES = ("env_failed", "no_interpreter", "no_snapshot")


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


def row_of(name: str, tag: str, spec: EnvSpec, run: TestRun, seconds: float, min_pass: float) -> Row:
    """A repository's row from its baseline run."""
    counts = Counter(run.outcomes.values())
    ran = counts["passed"] + counts["failed"] + counts["error"]
    rate = counts["passed"] / ran if ran else None
    built = run.status not in BUILD_FAILURES
    if run.status != "ok":
        reason = f"{run.status}: {(run.reason or '').strip()}"
    elif rate is None:
        reason = "no test ran"
    elif rate < min_pass:
        failing = sorted(t for t, o in run.outcomes.items() if o in ("failed", "error"))
        first = "; ".join(f"{t}: {run.failures.get(t, '')[:120]}" for t in failing[:3])
        reason = f"{ran - counts['passed']} of {ran} fail, e.g. {first}"
    else:
        reason = ""
    return Row(
        name,
        tag,
        spec.python,
        built,
        len(run.outcomes),
        counts["passed"],
        ran - counts["passed"],
        rate,
        round(seconds, 1),
        round(run.env_build_s, 1),
        " ".join(reason.split())[:400],
    )


def baseline(entry: str, cfg: ExecutionConfig, runner: Runner, min_pass: float, logs_dir: Path | None = None) -> Row:
    """One repository at its tag: derived, built (or found in the cache) and run once."""
    name, clone, tag = parse_entry(entry)
    start = time.monotonic()
    try:
        (source,) = git_sources([f"{name}={clone}"], tag, (), cfg)
    except UserError as exc:
        return Row(name, tag, "", False, 0, 0, 0, None, round(time.monotonic() - start, 1), 0.0, str(exc)[:400])
    spec = EnvSpec.from_json(source.instance.environment) or EnvSpec()
    run = runner.run(TestJob(source.instance, "", job_id=f"{name}@{tag}/baseline", tests=source.tests))
    if logs_dir is not None:  # the end of pytest's output and the spec, to see why
        logs_dir.mkdir(parents=True, exist_ok=True)
        text = f"{spec.to_json()}\n{run.status}: {run.reason}\n{run.log}\n"
        (logs_dir / f"{name.replace('/', '+')}@{tag}.log").write_text(text)
    return row_of(name, tag, spec, run, time.monotonic() - start, min_pass)


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
    parser.add_argument("--json", default="", help="also write the rows as JSON here")
    parser.add_argument("--logs", default="", help="write each run's spec and the end of its output here")
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
    runner = Runner(cfg)
    runner.ready()
    rows = []
    for (name, _clone, tag), entry in zip(entries, args.git, strict=True):
        rows.append(baseline(entry, cfg, runner, args.min_pass, Path(args.logs) if args.logs else None))
        r = rows[-1]
        print(f"[environments] {name}@{tag}: built={r.built} collected={r.collected} rate={r.pass_rate} "
              f"{r.seconds:.0f}s {r.reason[:200]}", file=sys.stderr, flush=True)  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=1))
    print(table(rows, args.min_pass))
    return 0


if __name__ == "__main__":
    sys.exit(main())
