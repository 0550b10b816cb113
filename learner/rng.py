"""Every RNG a process draws from, as JSON: captured into a checkpoint, restored on resume.

JSON, not a pickle: `torch.load(weights_only=False)` on a checkpoint runs whatever code its
writer put in it, so resuming a run directory someone else wrote would run their code. These
states are numbers and bytes only (the python and numpy Mersenne Twisters' words, torch's
generator bytes in base64), and restoring them needs no unpickling.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def _tensor_b64(state: torch.Tensor) -> str:
    return base64.b64encode(state.cpu().numpy().tobytes()).decode("ascii")


def _b64_tensor(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8).clone()


def rng_states() -> dict[str, Any]:
    """The python, numpy, torch (and CUDA, where present) RNG states, JSON-serialisable."""
    version, words, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    states: dict[str, Any] = {
        "python": [version, list(words), gauss],
        "numpy": [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "torch": _tensor_b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available():  # whatever this process has, on either device
        states["cuda"] = [_tensor_b64(s) for s in torch.cuda.get_rng_state_all()]
    return states


def set_rng_states(states: Mapping[str, Any]) -> None:
    version, words, gauss = states["python"]
    random.setstate((version, tuple(words), gauss))
    name, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(_b64_tensor(states["torch"]))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_b64_tensor(s) for s in states["cuda"]])
