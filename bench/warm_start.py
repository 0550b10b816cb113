"""The SFT warm start of a training config, exported as a Hugging Face model with no RL step:
the "after SFT" column of the out-of-domain table (bench/paper_table.py).

    python bench/warm_start.py --out runs/sft_hf learner.sft_steps=16 learner.sft_batch_size=4

The overrides are train.py's (the default job's config, SmolLM2-135M-Instruct on the demo set,
unless they say otherwise); `learner.sft_steps` must be > 0. The RL steps of the same run are
then `python train.py model.name=runs/sft_hf learner.sft_steps=0 trainer.steps=N`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import ray
from hydra import compose, initialize_config_dir

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from conf import config, logs  # noqa: E402
from learner.sft import warm_start  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the Hugging Face model directory to write")
    parser.add_argument("overrides", nargs="*", help="train.py's key=value overrides")
    args = parser.parse_args()
    logs.setup()
    import train  # here, not at the top: it pulls in torch, Ray and vLLM, which --help need not wait for
    from actors.cluster.join import loopback_only

    config.register()
    with tempfile.TemporaryDirectory(prefix="warm-start-") as run_dir:
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
            cfg = config.load(compose("config", overrides=[f"run_dir={run_dir}", *args.overrides]))
        if cfg.learner.sft_steps < 1:
            parser.error("learner.sft_steps must be > 0 (it is the number of SFT steps to export)")
        loopback_only()
        trainer = train.Trainer(cfg)
        try:
            warm_start(cfg, trainer.learner, trainer.tokenizer, trainer.run_dir)
            print(trainer.learner.save_hf(str(Path(args.out).resolve())))
        finally:
            trainer.shutdown()
            ray.shutdown()


if __name__ == "__main__":
    main()
