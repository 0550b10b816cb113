"""Snapshots: the repository at an instance's base commit, on disk, once per node.

A snapshot is the lower layer of every sandbox run on that instance (sandbox.py mounts it as an
overlay, so runs never modify it and cost no copy). Two sources (`EnvSpec.snapshot`):

    "files"  the instance's code context is the whole repository (the demo set: each instance's
             package imports on its own); the files are written out
    "git"    `git archive <base_commit>` of a local clone of the instance's repository; clones
             are found by repository name: an explicit `owner/name=PATH` entry (`--git
             psf/requests=/work/.mirror/psf+requests/repo`, `reward.execution.repos`), else
             the "owner/name" of the clone's `origin` remote, else the directory's name
             (`--git /clones/requests` serves "psf/requests")

Snapshots are cached by (source, repository, commit, content) under `root`, written to a
temporary directory renamed into place, and owned by uid 65534: the sandbox's user may then
modify them through the overlay (tests that write into the repository) without a copy-up of
the whole tree, while the files on disk stay the same.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from conf.io import locked
from data.git.repo import parse_clone
from data.patching import created_files
from data.schema import Instance
from reward.execution import identity
from reward.execution.environments import EnvSpec


class SnapshotUnavailable(RuntimeError):
    """The snapshot cannot be made (no clone of the repository, an unknown commit)."""


def repo_name(clone: Path) -> str:
    """ "owner/name" of a clone: its origin URL's last two parts, else the directory's name."""
    try:
        url = subprocess.run(
            ["git", "-C", str(clone), "remote", "get-url", "origin"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        url = ""
    parts = url.removesuffix(".git").replace(":", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 and url else clone.resolve().name


def clone_map(entries: Iterable[str | Path]) -> dict[str, Path]:
    """Repository name -> clone. Named entries win over names read from a clone (its origin
    remote, then its directory name), whatever the order they are given in."""
    named: dict[str, Path] = {}
    found: dict[str, Path] = {}
    for entry in entries:
        name, path = parse_clone(entry)
        if name is not None:
            named[name] = path
            continue
        found.setdefault(repo_name(path), path)
        found.setdefault(path.resolve().name, path)
    return {**found, **named}


class Snapshots:
    def __init__(self, root: Path, clones: Iterable[str | Path] = ()) -> None:
        self.root = root
        self.clones = clone_map(clones)

    def path(self, instance: Instance, spec: EnvSpec) -> Path:
        """The snapshot directory of the instance (made on first use)."""
        if spec.snapshot == "files":
            digest = hashlib.sha256(repr(sorted(instance.code_context.items())).encode()).hexdigest()[:16]
            return self._cached(f"files-{digest}", lambda tmp: self._write_files(instance, tmp))
        if spec.snapshot == "git":
            clone = self.clones.get(instance.repo) or self.clones.get(instance.repo.split("/")[-1])
            if clone is None:
                raise SnapshotUnavailable(f"{instance.repo}: no local clone (pass --git with a clone of it)")
            key = f"git-{instance.repo.replace('/', '__')}-{instance.base_commit[:16]}"
            return self._cached(key, lambda tmp: self._archive(clone, instance.base_commit, tmp))
        raise SnapshotUnavailable(f"environment.snapshot={spec.snapshot!r}: accepted values are 'files', 'git'")

    def _cached(self, key: str, make: object) -> Path:
        target = self.root / key
        if target.is_dir():
            return target
        with locked(target):
            if not target.is_dir():
                tmp = target.with_name(f".{key}.tmp")
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir(parents=True)
                make(tmp)  # type: ignore[operator]
                for path in [tmp, *tmp.rglob("*")]:
                    identity.give(path)
                os.replace(tmp, target)
        return target

    @staticmethod
    def _write_files(instance: Instance, out: Path) -> None:
        created = created_files(instance.patch)
        for rel, content in instance.code_context.items():
            if rel in created:
                continue  # shown to the model as "", but it does not exist at the base commit
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")

    @staticmethod
    def _archive(clone: Path, commit: str, out: Path) -> None:
        archive = subprocess.run(
            ["git", "-C", str(clone), "archive", "--format=tar", commit], capture_output=True, timeout=600
        )
        if archive.returncode != 0:
            raise SnapshotUnavailable(f"{clone}: git archive {commit[:12]} failed: {archive.stderr.decode()[-300:]}")
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True, timeout=600)
