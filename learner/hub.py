"""Hub models: a Hugging Face hub id (`org/name`) and revision -> one local snapshot directory.

The cache is huggingface_hub's own (HF_HOME, or HF_HUB_CACHE: `models--org--name/snapshots/<commit>/`,
`refs/<branch>` naming a commit), so a model fetched once with `hf download` serves every run.
`snapshot` looks there first (local_files_only) and only then downloads, where the hub is
reachable and HF_HUB_OFFLINE is unset. Cache first means an offline machine never waits on the
network, and a run restarted later keeps the commit it had; a newer `main` arrives only through
`hf download` (or a `model.revision` naming it). When neither works the error is one line naming
the id, the revision and the command that fetches it.

Only what the engines and the learner load is fetched (`FILES`: config, tokenizer, safetensors
weights); a repository's duplicate `*.bin`, `*.gguf` or `original/*.pth` copies are left on the hub.

Multi-node: the driver resolves the id once, to a snapshot path that names the repository and its
commit. An actor on a node where that path is absent (another machine, another HF_HOME) calls
`on_this_node`, which re-resolves the same commit from that node's own cache, downloading it
there if that node reaches the hub: every engine and learner rank loads the same commit, never a
`main` that moved meanwhile. A plain local directory has no such fallback: it must exist at the
same path on every node (a shared file system).
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

from conf.config import ConfigError

# What a snapshot needs: config and generation config, tokenizer files, safetensors weights (and
# their index), a chat template file.
FILES = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
# <cache>/models--org--name/snapshots/<commit>: how the hub cache lays out a snapshot.
_SNAPSHOT = re.compile(r".*/models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})/?")


def snapshot(repo_id: str, revision: str, *, key: str = "model.name") -> str:
    """The local snapshot directory of `repo_id` at `revision` (a branch, tag or commit): from
    the cache, else downloaded; a ConfigError naming `key` when neither works."""
    # huggingface_hub is imported here: learner.models, which imports this module, is read by
    # commands that never touch the hub
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    where = f"{key}={repo_id!r} (revision {revision!r})"
    try:
        path = snapshot_download(repo_id, revision=revision, allow_patterns=FILES, local_files_only=True)
        if _has_weights(path):
            return path
    except LocalEntryNotFoundError:  # not cached (or cached incompletely): try the hub
        pass
    except ValueError as exc:  # huggingface_hub's validation of the id
        raise ConfigError(f"{key}={repo_id!r}: not a valid hub id ({exc})") from None
    fetch = f"`hf download {repo_id} --revision {revision}`"
    if constants.HF_HUB_OFFLINE:
        raise ConfigError(_missing(where, "HF_HUB_OFFLINE is set", fetch, constants.HF_HUB_CACHE))
    print(f"[model] {repo_id} at {revision} is not cached: fetching it into {constants.HF_HUB_CACHE}", flush=True)
    try:
        path = snapshot_download(repo_id, revision=revision, allow_patterns=FILES)
    except RevisionNotFoundError:
        raise ConfigError(f"{where}: the hub has no such branch, tag or commit of {repo_id}") from None
    except RepositoryNotFoundError:  # gated and private repositories answer the same
        raise ConfigError(
            f"{key}={repo_id!r}: not on the hub, or gated or private (`hf auth login` with a token that may read it)"
        ) from None
    except (OSError, ConnectionError) as exc:  # unreachable: LocalEntryNotFoundError, a connection error
        cause = exc.__cause__ or exc  # huggingface_hub raises LocalEntryNotFoundError from the network's error
        first = str(cause).splitlines()[0] if str(cause) else ""
        reason = f"the hub is unreachable ({type(cause).__name__}: {first})"
        raise ConfigError(_missing(where, reason, fetch, constants.HF_HUB_CACHE)) from None
    if not _has_weights(path):
        raise ConfigError(f"{where}: the snapshot {path} holds no *.safetensors weights (the only format fetched)")
    return path


def on_this_node(model_path: str) -> str:
    """The directory an actor loads: `model_path` (the driver's resolution) where this node has
    it, else the same hub commit from this node's cache or the hub (see the module docstring)."""
    if Path(model_path).is_dir():
        return model_path
    found = _SNAPSHOT.fullmatch(model_path)
    if found is None:
        raise ConfigError(
            f"model directory {model_path} is absent on node {socket.gethostname()}: a local model must be at the "
            "same path on every node (or give model.name a hub id, which each node fetches into its own cache)"
        )
    return snapshot(f"{found['org']}/{found['name']}", found["commit"])


def _has_weights(path: str) -> bool:
    return any(Path(path).glob("*.safetensors"))


def _missing(where: str, reason: str, fetch: str, cache: str) -> str:
    return (
        f"{where}: not in the Hugging Face cache {cache} and {reason}; fetch it with {fetch} where the hub is "
        "reachable (into this HF_HOME, or copy the cache here), or give a local model directory"
    )
