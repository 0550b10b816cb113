"""`python -m reward.execute`: run predictions against instances' tests, SWE-bench's way.

    python -m reward.execute --instances DATA --predictions FILE --out DIR
        [reward.execution.repos=[CLONE,...]] [reward.execution.num_runners=2 | ray.address=ADDR]
        [reward.execution.wall_s=S] [reward.execution.cache_dir=DIR] [reward.execution.*=...]

The pool's settings are training's keys (conf/overrides.py: every `reward.execution.*` and
`ray.address`, as `key=value`); `--git`, `--workers`, `--wall-s`, `--cache-dir` and
`--ray-address` are refused with their new names.

DATA: a Parquet file or directory of the instance schema (v3: FAIL_TO_PASS, PASS_TO_PASS,
environment; v4: needs_network), or `demo` / `demo-js` (the embedded sets). FILE: SWE-bench
predictions, one object per line (JSONL) or a JSON list, each with `instance_id`,
`model_name_or_path` and `model_patch` (a unified diff).

Each prediction's patch and then the instance's test patch are applied to the snapshot and the
instance's tests run in the sandbox, on the test-runner pool (reward/execution/pool.py). Resolved
= every FAIL_TO_PASS and every PASS_TO_PASS test passed. DIR/report.json, with SWE-bench's
field names so that tools that read one read the other:

    resolved_ids, unresolved_ids       the predictions whose tests ran
    error_ids                          {instance_id: reason}: the patch does not apply (or names
                                       a path outside the repository), the environment failed,
                                       the run was stopped, no report, a forged report
    tampered_ids                       of those, the predictions whose report was forged (the
                                       harness's canaries were wrong: docs/security.md)
    empty_patch_ids                    an empty model_patch (not run)
    missing_instance_ids               predictions of instances not in DATA (not run)
    needs_network                      {instance_id: tests}: of the instances run, the tests their
                                       labels leave out because they need the internet (the
                                       instance's needs_network, schema v4): unchecked here
    total_predictions, submitted, completed, resolved, unresolved, error, empty_patch

and DIR/logs/<instance_id>.json per run (status, every test's outcome, the end of pytest's
output). Every file is written atomically.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from actors.cluster.join import ray_session
from conf import logs, overrides
from conf.errors import UserError, fail
from conf.io import write_text
from data.loader import read_instances
from reward.execution.pool import TestPool
from reward.execution.predictions import network_tests, read_predictions, report
from reward.execution.runner import TestJob

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reward.execute", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--instances", required=True, help="Parquet file or directory of instances, or 'demo' / 'demo-js'"
    )
    parser.add_argument("--predictions", required=True, help="SWE-bench predictions, JSONL or a JSON list")
    parser.add_argument("--out", required=True, help="directory for report.json and logs/")
    args, cfg, ray_address = overrides.parse_pool_command(parser, argv)
    logs.setup()

    try:
        predictions = read_predictions(args.predictions)
        instances = {i.instance_id: i for i in read_instances(args.instances, 0)}
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
    except (UserError, OSError) as exc:
        fail(parser.prog, str(exc))

    missing = [p["instance_id"] for p in predictions if p["instance_id"] not in instances]
    todo = [p for p in predictions if p["instance_id"] in instances and p["model_patch"].strip()]
    jobs = [TestJob(instances[p["instance_id"]], p["model_patch"], job_id=p["instance_id"]) for p in todo]
    started = time.monotonic()

    with ray_session(ray_address, max(cfg.num_runners, 1)):
        pool = TestPool(cfg)
        runs = {run.job_id: run for run in pool.run(jobs, what="predictions")}
        pool.shutdown()
    (out / "logs").mkdir(exist_ok=True)
    for iid, run in runs.items():
        record = {
            "instance_id": iid,
            "status": run.status,
            "resolved": run.resolved,
            "reason": run.reason,
            "seconds": run.seconds,
            "tests": run.outcomes,
            "log": run.log,
        }
        write_text(out / "logs" / f"{iid}.json", json.dumps(record, indent=1) + "\n")
    network = network_tests({i: inst.needs_network for i, inst in instances.items()}, list(runs))
    summary = report(predictions, runs, missing) | {
        "needs_network": network,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    write_text(out / "report.json", json.dumps(summary, indent=1) + "\n")
    counts = {k: summary[k] for k in ("total_predictions", "resolved", "unresolved", "error", "empty_patch")}
    print(json.dumps(counts))
    if network:
        log.warning(
            "[execute] %d instance(s) have tests that need the internet, in neither label: unchecked here "
            "(report.json: needs_network)",
            len(network),
        )
    log.info("[execute] wrote %s", out / "report.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
