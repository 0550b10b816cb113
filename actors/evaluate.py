"""Evaluate a checkpoint: greedy and sampled answers to held-out issues, scored by the SWE-RL reward.

    python -m actors.evaluate checkpoint=runs/default/hf data=demo [split=heldout]
        [heldout_fraction=0.1] [samples=16] [temperature=1.0] [max_new_tokens=512] [out=runs/eval]
    python -m actors.evaluate checkpoint=... data=... --oracle      # harness self-check
    python -m actors.evaluate mode=agentless checkpoint=... data=... [git=CLONE] [localize_top=3]
        [samples=16] [repro_tests=4] [oracle_localize=true] [oracle_repair=true]
    python -m actors.evaluate mode=agent checkpoint=... data=... [git=CLONE] [max_turns=20]
        [command_timeout_s=60]
    python -m actors.evaluate mode=ood suite=humaneval[,mbpp_plus,...] checkpoint=... [data=PATH]
        [samples=N temperature=T] [limit=K] [oracle=true] [samples_file=samples.jsonl]
    either mode: [engines=1] [engine_gpus=0] [tensor_parallel_size=1] [ray_address=] [test_workers=2]

Four modes. `mode=oracle_context` (the default, described below) is the quick proxy the paper
also reports: the model is handed the oracle's files and scored by the reward. `mode=agentless`
is how the paper measured SWE-bench: localization on the repository's tree, repair with whole
files, reproduction and regression tests, a vote, resolution by the tests; it lives in
actors/eval/agentless_mini.py (its docstring has the stages and summary.json's figures).
`mode=agent`: the policy as an agent, one greedy episode per instance in a sandbox session,
its final patch resolved by the tests (actors/eval/episodes.py). `mode=ood`: the paper's
out-of-domain suites (Table 3: HumanEval+, MBPP+, CRUXEval, MATH, MMLU), zero-shot, code
answers run in the sandbox (actors/eval/out_of_domain.py). This module only parses the shared
arguments and dispatches.

Where the work runs (both modes, actors/eval/session.py): generation on `engines` rollout actors
on Ray, started as the trainer starts them (the same vLLM engine set-up, `engine_gpus` GPUs and
`tensor_parallel_size` each; every stage's prompts are shared among them, each request with its
own seed, so the answers do not depend on their number); `engines=0` runs one engine in this
process instead (no Ray start: quicker for small runs on a laptop, and on a single GPU box it
uses this process's GPUs). Tests run on `test_workers` runners of the test-runner pool on the
same Ray. Ray is a local cluster on 127.0.0.1, or the cluster at `ray_address` / RAY_ADDRESS
(`ray job submit`): docs/cluster.md, section 6. summary.json's `engines` records which.

The figures of each mode: actors/eval/oracle_context.py and actors/eval/agentless_mini.py.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from actors.eval import agentless_mini, episodes, out_of_domain
from actors.eval.oracle_context import evaluate, write
from conf import logs
from conf.errors import UserError, fail
from conf.eval import parse_args
from learner import models

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return 0
    logs.setup()
    try:
        cfg = parse_args(argv)
        if cfg.checkpoint and not Path(cfg.checkpoint).exists():  # a hub id (validated): its snapshot
            cfg.model_name = cfg.model_name or cfg.checkpoint  # the predictions name the id, not the cache
            cfg.checkpoint = models.local_model(cfg.checkpoint, key="checkpoint")
    except UserError as exc:
        fail("python -m actors.evaluate", str(exc))
    if cfg.mode == "agentless":
        return agentless_mini.main(cfg)
    if cfg.mode == "agent":
        return episodes.main(cfg)
    if cfg.mode == "ood":
        return out_of_domain.main(cfg)
    report = evaluate(cfg)
    out_dir = write(report, cfg.out)
    keys = ("instances", "split", "mode", "patch_roundtrip_failures", "greedy", "sampled", "tests")
    summary = {k: report.summary[k] for k in keys if k in report.summary}
    print(json.dumps(summary, indent=2))
    log.info("[eval] wrote %s/summary.json, predictions.jsonl, answers.jsonl", out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
