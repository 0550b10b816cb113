"""The Agentless-Mini evaluation on JavaScript repositories: the plumbing on every JS runner, and
the regression fallback's test selection on real JavaScript trees.

    python bench/agentless_js.py --out /tmp/agentless_js [--mirror express=/work/.mirror/expressjs+express/repo ...]

1. The add() repository of tests/reward/jsrepos.py under each runner (node-test, jest, mocha,
   vitest; its dependencies from the npm cache scripts/setup.sh seeds, offline), once with its
   PASS_TO_PASS test and once without (the regression fallback's case), written as one parquet
   file and evaluated by the command itself with both oracle switches and no reproduction test
   (`python -m actors.evaluate mode=agentless ... oracle_localize=true oracle_repair=true
   repro_tests=0`, in this process): every instance must resolve. Then, per runner, a
   reproduction test written as a model would write it for that runner, saved where the
   prompt says (data/agentless/prompts.repro_target), run on the original code (kept when it
   fails) and on the gold patch.
2. Per `--mirror NAME=GIT_DIR` (a clone or a bare mirror; its HEAD): the JavaScript view's
   files and test files, and for each of a few source files the test files the regression
   fallback selects (data/agentless/regression_tests.py) and the seconds it took.

Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from actors.eval import agentless_mini  # noqa: E402
from actors.eval.agentless_sandbox import Case, case_repro_target, run_tests  # noqa: E402
from actors.observe.phases import PhaseTimer  # noqa: E402
from conf import eval as eval_config  # noqa: E402
from conf.config import ExecutionConfig, ModelConfig  # noqa: E402
from data.agentless.prompts import read_test_file, repro_test_patch  # noqa: E402
from data.agentless.regression_tests import regression_test_files  # noqa: E402
from data.agentless.repo_view import changed_paths, files_view, git_view  # noqa: E402
from data.git.repo import Repo  # noqa: E402
from learner.models import resolve  # noqa: E402
from reward.execution.jsenv import is_js_test_file  # noqa: E402
from reward.execution.runner import Runner, TestJob  # noqa: E402
from tests.reward import jsrepos  # noqa: E402

RUNNERS = ("node-test", "jest", "mocha", "vitest")
_CHECK = "expect(add(1, -2)).toBe(-1)"
_ASSERT = "assert.strictEqual(add(1, -2), -1)"
REPRO = {  # a reproduction test per runner, as the prompt asks for it
    "node-test": "const { test } = require('node:test');\nconst assert = require('assert');\n"
    f"const {{ add }} = require('../lib/add');\ntest('sign', () => {{ {_ASSERT}; }});\n",
    "jest": f"const {{ add }} = require('../lib/add');\ntest('sign', () => {{ {_CHECK}; }});\n",
    "mocha": "const assert = require('assert');\nconst { add } = require('../lib/add');\n"
    f"describe('add', () => {{ it('sign', () => {{ {_ASSERT}; }}); }});\n",
    "vitest": "import { test, expect } from 'vitest';\nimport { add } from '../lib/add';\n"
    f"test('sign', () => {{ {_CHECK}; }});\n",
}
# Source files whose importing tests the fallback selects, per mirror name (any that exist).
EDITS = {
    "express": ["lib/response.js", "lib/utils.js", "lib/request.js"],
    "axios": ["lib/helpers/combineURLs.js", "lib/core/mergeConfig.js", "lib/adapters/http.js"],
    "zod": ["packages/zod/src/v4/core/util.ts", "packages/zod/src/v3/types.ts"],
    "date-fns": ["src/addDays/index.ts", "src/format/index.ts"],
}


def plumbing(out: Path) -> None:
    rows = []
    for name in RUNNERS:
        inst = jsrepos.instance(name)
        rows += [inst.to_row(), replace(inst, instance_id=f"{inst.instance_id}-no-p2p", pass_to_pass=()).to_row()]
    data = out / "js_instances.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    args = ["mode=agentless", f"model.name={resolve(ModelConfig(name='tiny'))}", f"data={data}"]
    args += ["oracle_localize=true", "oracle_repair=true", "repro_tests=0", "group_size=2"]
    args += ["reward.execution.num_runners=0", "rollout.num_actors=0", f"out={out / 'eval'}"]
    summary, _ = agentless_mini.evaluate(eval_config.parse_args(args))
    keys = ("instances", "candidates", "regression_fallback", "resolve_rate", "report", "seconds")
    print(json.dumps({"plumbing": {k: summary[k] for k in keys}}))
    runner = Runner(ExecutionConfig(cache_dir=str(out / "cache"), wall_s=120.0, cpu_s=120, output_kb=256))
    for name in RUNNERS:
        inst = jsrepos.instance(name)
        view = files_view(inst, "javascript")
        case = Case(inst, view, changed_paths(inst, view.files))
        target = case_repro_target(case)
        test = read_test_file(f"<solution>```{target.fence}\n{REPRO[name]}```</solution>", target)
        assert test is not None
        patch = repro_test_patch(test, target.path)
        start = time.monotonic()
        run_tests([case], [(case, patch)], lambda jobs, what: [runner.run(j) for j in jobs], PhaseTimer())
        on_fix = runner.run(TestJob(inst, inst.patch, "repro-on-gold", test_patch=patch))
        print(json.dumps({"runner": name, "repro_path": target.path, "kept": len(case.repro_kept),
                          "on_gold": on_fix.outcomes, "seconds": round(time.monotonic() - start, 1)}))  # fmt: skip


def selection(name: str, git_dir: str) -> None:
    repo = Repo(Path(git_dir))
    head = repo.text("rev-parse", "HEAD").strip()
    view = git_view(repo, head, "javascript")
    tests = [p for p in view.files if is_js_test_file(p)]
    print(json.dumps({"mirror": name, "head": head[:12], "files": len(view.files), "test_files": len(tests)}))
    for edited in EDITS.get(name, []):
        if edited not in view.files:
            continue
        start = time.monotonic()
        selected = regression_test_files(view, [edited], language="javascript", is_test=is_js_test_file)
        print(json.dumps({"edited": edited, "selected": selected, "seconds": round(time.monotonic() - start, 2)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="a folder for the data, the evaluation's output and the cache")
    parser.add_argument("--mirror", action="append", default=[], help="NAME=GIT_DIR (express, axios, zod, date-fns)")
    args = parser.parse_args()
    if (why := jsrepos.skip_reason()) is not None:
        sys.exit(f"agentless_js: {why}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with jsrepos.offline_npm():
        plumbing(out)
    for spec in args.mirror:
        name, _, git_dir = spec.partition("=")
        selection(name, git_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
