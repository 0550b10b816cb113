"""What every actor of a run shares, resolved once by the driver and handed to each actor.

The config sections (`cfg.learner`, `cfg.rollout`, ...) say how each role behaves; these are
the facts of the run that several roles need and that are only known once the driver has
started: the policy's local directory (after `learner.models.resolve`; a hub snapshot's path
names its commit, so an actor on another node re-resolves the same one: learner/hub.py), the
chat template of the prompts, its dtype and seed, the device (conf/device.py), the deadline of
every remote call and collective, and whether third-party logs are shown. One typed record
instead of seven keyword arguments on every constructor.
"""

from __future__ import annotations

from dataclasses import dataclass

from conf import device as devices


@dataclass(frozen=True)
class Runtime:
    model_path: str  # local Hugging Face directory of the policy (engines and learner load it)
    dtype: str  # model.dtype: "float32" or "bfloat16"
    seed: int  # the run's seed (each actor derives its own from it)
    device: devices.Device  # "cpu" or "cuda": decided once, conf/device.py
    timeout_s: float  # trainer.phase_timeout_s: every remote call and collective
    verbose: bool = False  # trainer.verbose: third-party logs inside the actors too
    # The chat template applied instead of the model's own ("" = its own): agent turns and the
    # exported checkpoint use the driver's (learner/models.py chat_template)
    chat_template: str = ""
