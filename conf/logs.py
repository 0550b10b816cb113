"""What a run prints: the project's `[tag] message` lines, and third-party noise kept quiet.

Every module logs through `logging.getLogger(__name__)` with a `[tag]` at the start of its
message (`[setup]`, `[step 3/10]`, `[fleet]`, `[error]`); `setup` prints those as they are,
INFO to stdout and WARNING and above to stderr. Third-party libraries (vLLM, DeepSpeed, Ray,
transformers, torch) are chatty: a newcomer's `make run` printed 280 lines, most of them INFO
lines, environment advisories ("libtcmalloc is not found"), deprecation warnings and progress
bars. Unless `verbose` (`trainer.verbose=true`) their records below ERROR are dropped, and what
they do print is prefixed with the library's name. Libraries inside Ray actors log in those
processes: `actor_env` is the environment that quiets them there; `quiet_deepspeed` does it for
DeepSpeed's logger (which reads no environment variable) once a learner rank imports it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from io import StringIO

# Top-level modules and packages of this project: their records are printed as written.
PROJECT = ("train", "actors", "learner", "reward", "data", "conf", "bench", "__main__")


def _is_project(name: str) -> bool:
    return name.split(".", 1)[0] in PROJECT


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        if _is_project(record.name):
            return text
        return f"[{record.name.split('.', 1)[0]}] {record.levelname.lower()}: {text}"


class _Below(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


# Third-party records below this level are dropped unless verbose.
QUIET_LEVEL = logging.ERROR


def third_party_level(verbose: bool) -> int:
    return logging.INFO if verbose else QUIET_LEVEL


class _Quiet(logging.Filter):
    """Drops third-party records below QUIET_LEVEL (the project's own always pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= QUIET_LEVEL or _is_project(record.name)


def setup(verbose: bool = False) -> None:
    """Route every logger of this process to the console in the project's style (idempotent:
    replaces the root handlers, e.g. Hydra's)."""
    out = logging.StreamHandler(sys.stdout)
    out.addFilter(_Below(logging.WARNING))
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    for handler in (out, err):
        handler.setFormatter(_Format())
        if not verbose:
            handler.addFilter(_Quiet())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(out)
    root.addHandler(err)
    root.setLevel(logging.INFO)
    # Libraries that install their own handlers instead of propagating to the root.
    for name in ("vllm", "ray", "DeepSpeed"):
        logging.getLogger(name).setLevel(third_party_level(verbose))
    if not verbose:  # progress bars of libraries in this process (a model's conversion, once)
        os.environ.setdefault("TQDM_DISABLE", "1")


def actor_env(verbose: bool) -> dict[str, str]:
    """Environment of an actor's process that quiets the libraries inside it (none if verbose)."""
    if verbose:
        return {}
    return {
        "VLLM_LOGGING_LEVEL": "ERROR",  # vLLM's INFO lines and CPU-build advisories
        "TQDM_DISABLE": "1",  # weight loading and shard writing progress bars
        "PYTHONWARNINGS": "ignore",  # third-party deprecation warnings
        "TORCH_CPP_LOG_LEVEL": "ERROR",  # torch's C++ warnings (NUMA binding)
        "TRANSFORMERS_VERBOSITY": "error",
    }


def quiet_deepspeed(verbose: bool) -> None:
    """DeepSpeed's logger writes its own lines (it does not propagate); call after importing it."""
    logging.getLogger("DeepSpeed").setLevel(third_party_level(verbose))


@contextmanager
def quiet_stdout(verbose: bool) -> Iterator[None]:
    """Swallow what a library prints (not logs) to stdout, unless verbose: DeepSpeed prints a
    line per rank when it loads its shared-memory op."""
    if verbose:
        yield
        return
    with redirect_stdout(StringIO()):
        yield
