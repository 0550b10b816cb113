"""Evaluate a model: greedy and sampled answers to held-out issues, in one of four modes.

    python -m actors.evaluate model.name=runs/default/hf data=demo [split=heldout]
        [heldout_fraction=0.1] [group_size=16] [rollout.temperature=1.0] [rollout.max_new_tokens=512]
        [out=runs/eval]
    python -m actors.evaluate model.name=... data=... --oracle      # harness self-check
    python -m actors.evaluate mode=agentless model.name=... data=... [reward.execution.repos=[CLONE,...]]
        [localize_top=3] [group_size=16] [repro_tests=4] [oracle_localize=true] [oracle_repair=true]
    python -m actors.evaluate mode=agent model.name=... data=... [reward.execution.repos=[CLONE]]
        [max_turns=20] [command_timeout_s=60]
    python -m actors.evaluate mode=ood suite=humaneval[,mbpp_plus,...] model.name=... [data=PATH]
        [group_size=N rollout.temperature=T] [limit=K] [oracle=true] [samples_file=samples.jsonl]
    every mode: [rollout.num_actors=1] [rollout.num_gpus=0] [rollout.tensor_parallel_size=1]
        [model.dtype=float32] [reward.execution.num_runners=2] [ray.address=]

The keys are the training schema's where they name the same thing (conf/eval.py; the whole list
in docs/config.md): the model is `model.*` (model.name a known name or a Hugging Face directory,
as in training), the engines `rollout.*`, the test-runner pool and the sandbox `reward.execution.*`,
the samples per instance `group_size`. A former flat name (`engines`, `samples`, `git`,
`checkpoint`, ...) is refused with its new one.

The four modes (`mode=`):

    oracle_context  the default: a quick proxy, NOT a SWE-bench score. The model is handed the
                    files the oracle patch changes (the paper's RL prompt: the "oracle" context)
                    and its answers are scored by the SWE-RL reward against the oracle patch, and,
                    where the instances carry FAIL_TO_PASS, by their tests. Being told which
                    files to change takes away most of SWE-bench's difficulty (localization), so
                    its figures are not comparable with a SWE-bench resolve rate
                    (actors/eval/oracle_context.py).
    agentless       how the paper measured SWE-bench: Agentless Mini on the repository's whole
                    tree (localization, repair with whole files, reproduction and regression
                    tests, a vote), resolved by the tests (actors/eval/agentless_mini.py: its
                    stages and summary.json's figures).
    agent           the policy as an agent: one greedy episode per instance in a sandbox session,
                    its final patch resolved by the tests (actors/eval/episodes.py).
    ood             the paper's out-of-domain suites (Table 3: HumanEval+, MBPP+, CRUXEval, MATH,
                    MMLU), zero-shot, code answers run in the sandbox (actors/eval/out_of_domain.py).

This module only parses the arguments, resolves the model once (learner/models.py, as the
trainer does) and dispatches.

Where the work runs (every mode, actors/eval/session.py): generation on `rollout.num_actors`
rollout actors on Ray, started as the trainer starts them (the same vLLM engine set-up,
`rollout.num_gpus` GPUs and `rollout.tensor_parallel_size` each; every stage's prompts are shared
among them, each request with its own seed, so the answers do not depend on their number);
`rollout.num_actors=0` runs one engine in this process instead (no Ray start: quicker for small
runs on a laptop, and on a single GPU box it uses this process's GPUs). Tests run on
`reward.execution.num_runners` runners of the test-runner pool on the same Ray. Ray is a local
cluster on 127.0.0.1, or the cluster at `ray.address` / RAY_ADDRESS (`ray job submit`):
docs/cluster.md, section 6. summary.json's `engines` records which.
"""

from __future__ import annotations

import json
import logging
import sys

from actors.eval import agentless_mini, episodes, out_of_domain
from actors.eval.oracle_context import evaluate, write
from conf import logs
from conf.errors import UserError, fail
from conf.eval import needs_model, parse_args
from learner import models

log = logging.getLogger(__name__)


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return 0
    logs.setup()
    try:
        cfg = parse_args(argv)
        if needs_model(cfg):  # once, to its local directory (a hub id: its snapshot), as the trainer resolves it
            cfg.predictions_name = cfg.predictions_name or cfg.model.name  # the id, not the cache path
            cfg.model.name = models.resolve(cfg.model)
            cfg.model.chat_template = models.chat_template(cfg.model, cfg.model.name)  # its text, once
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
