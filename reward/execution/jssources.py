"""What the host's JavaScript package manager may fetch: registry packages by name, and files
inside the repository.

The host step of a JavaScript environment (node.py) runs npm, yarn or pnpm as root, given the
repository's package.json files and its lock file: text a hostile repository wrote. A
dependency named by a path (`file:/root/x`, `../../etc`, `link:/srv`), a git URL
(`git+file:///root/repo`, `github:user/repo`, `user/repo`) or a tarball URL would make that
root process read a host path or fetch from anywhere, and lay what it got into node_modules,
which the sandbox's user reads. `check(snapshot)` refuses all of these before anything runs,
with an error naming the file, the dependency and what it names:

    allowed     a version, range or dist-tag (`^1.2.0`, `latest`): a registry package by name;
                an alias of one (`npm:other@^1`); a workspace or catalog reference
                (`workspace:*`, `catalog:`); a path inside the repository (`file:vendor/x.tgz`,
                a vendored tarball; `file:packages/a`, `link:`, a workspace folder), resolved
                from the manifest's folder, its real path (links followed) inside the
                repository; an override's `$name` reference
    refused     any other form: paths outside, absolute paths, git and http(s) URLs, hosted-git
                shorthands, tarball paths outside

Read: every package.json the host step copies (dependencies, devDependencies,
optionalDependencies, peerDependencies, overrides, resolutions, pnpm.overrides,
pnpm.patchedDependencies' patch files); the lock file's `resolved`/`version`/`tarball`/
`directory` fields and link entries, where a URL must be a registry's tarball URL
(`https://registry.npmjs.org/<name>/-/<file>.tgz`, a host of REGISTRIES or the configured
registry's) and a path must be inside; a pnpm lock naming a git repository is refused.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Registries whose tarball URLs a lock file may name (npm's and yarn's defaults), besides the
# one npm is configured with (npm_config_registry).
REGISTRIES = frozenset({"registry.npmjs.org", "registry.yarnpkg.com", "npm.jsr.io"})
# package.json's fields whose values are dependency specs, by name.
_DEPENDENCY_FIELDS = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
# A version, a range or a dist-tag: what npm resolves against the registry by the package's name.
_REGISTRY_SPEC = re.compile(r"[\w.*^~<>=|! +-]*")
_TARBALL = (".tgz", ".tar.gz", ".tar")
_REGISTRY_PATH = re.compile(r"/(@[^/]+/)?[^/@]+/-/(@[^/]+/)?[^/]+\.tgz$|^/~/\d+/@jsr/[^/]+/[^/]+\.tgz$")  # npm's; JSR's
_LOCAL = ("file:", "link:", "portal:")
# pnpm-workspace.yaml's settings (pnpm 10 reads them there) that name a host path or another
# source of code or packages: a hostile repository's would make the host's pnpm run or read them.
_PNPM_REFUSED = frozenset({"registry", "registries", "npmPath", "useNodeVersion", "executionEnv", "configDependencies"})
# Its settings that name a folder or file: allowed inside the repository only (the host step runs
# with --ignore-pnpmfile and a store of its own; these must not point it at a host path).
_PNPM_PATHS = frozenset(
    {"pnpmfile", "globalPnpmfile", "storeDir", "virtualStoreDir", "modulesDir", "cacheDir", "stateDir"}
    | {"lockfileDir", "patchesDir", "globalDir", "globalBinDir"}
)
# Bounds on what is read: a lock file bigger than this is refused (npm's own are a few MB).
_LOCK_BYTES = 64 << 20


class ForeignSource(RuntimeError):
    """A manifest or lock file names something other than a registry package or a repository file."""


def check(snapshot: Path, manifests: list[str], lock: str | None) -> None:
    """Refuse (ForeignSource, naming each) what the host step must not fetch: the dependencies of
    `manifests` (package.json paths in the snapshot) and the entries of the lock file `lock`."""
    bad: list[str] = []
    for rel in manifests:
        manifest = _json(snapshot / rel)
        folder = posixpath.dirname(rel)
        for where, spec in _specs(manifest):
            why = _spec_problem(snapshot, folder, spec)
            if why:
                bad.append(f"{rel}: {where} = {spec!r} {why}")
        patches = (manifest.get("pnpm") or {}).get("patchedDependencies") if isinstance(manifest, dict) else None
        for name, patch in (patches or {}).items() if isinstance(patches, dict) else ():
            if not isinstance(patch, str) or not _inside(snapshot, folder, patch):
                bad.append(f"{rel}: pnpm.patchedDependencies {name} = {patch!r} is not a file inside the repository")
    if lock is not None:
        bad += [f"{lock}: {problem}" for problem in _lock_problems(snapshot, lock)]
    workspace = snapshot / "pnpm-workspace.yaml"
    if workspace.is_file() and not workspace.is_symlink():
        bad += [f"pnpm-workspace.yaml: {problem}" for problem in _pnpm_settings(snapshot, workspace.read_text("utf-8"))]
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ForeignSource(f"only registry packages by name and files inside the repository are installed: {shown}")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _specs(manifest: Any) -> Iterator[tuple[str, str]]:
    """(where, spec) of every dependency spec of a package.json."""
    if not isinstance(manifest, dict):
        return
    for field in _DEPENDENCY_FIELDS:
        deps = manifest.get(field)
        for name, spec in deps.items() if isinstance(deps, dict) else ():
            yield f"{field}.{name}", spec
    pnpm = manifest.get("pnpm")
    nested = [("overrides", manifest.get("overrides")), ("resolutions", manifest.get("resolutions"))]
    nested.append(("pnpm.overrides", pnpm.get("overrides") if isinstance(pnpm, dict) else None))
    for where, value in nested:
        yield from _leaves(where, value)


def _leaves(where: str, value: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """npm's overrides nest (`{"a": {".": "1.0", "b": "2.0"}}`): every string under them."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict) and depth < 20:
        for key, inner in value.items():
            yield from _leaves(f"{where}.{key}", inner, depth + 1)
    elif value is not None:
        yield where, value


def _spec_problem(snapshot: Path, folder: str, spec: object) -> str | None:
    """Why a package.json dependency spec is refused, or None."""
    if not isinstance(spec, str):
        return "is not a string"
    spec = spec.strip()
    if spec.startswith("npm:"):  # an alias: npm:name@spec
        rest = spec[len("npm:") :]
        at = rest.find("@", 1)
        return _spec_problem(snapshot, folder, rest[at + 1 :] if at > 0 else "")
    if spec.startswith(("workspace:", "catalog:")):
        rest = spec.split(":", 1)[1]
        if _REGISTRY_SPEC.fullmatch(rest) or spec.startswith("catalog:"):
            return None
        return None if _inside(snapshot, folder, rest) else "names a path outside the repository"
    if spec.startswith("$") and _REGISTRY_SPEC.fullmatch(spec[1:].replace("/", "").replace("@", "")):
        return None  # an override's reference to a direct dependency's spec
    if spec.startswith(_LOCAL):
        return None if _inside(snapshot, folder, spec.split(":", 1)[1]) else "names a path outside the repository"
    if ":" in spec:
        return "is not a registry package by name (a URL or a git repository)"
    if spec.startswith((".", "/", "~/")) or spec.endswith(_TARBALL):
        return None if _inside(snapshot, folder, spec) else "names a path outside the repository"
    if _REGISTRY_SPEC.fullmatch(spec):
        return None
    return "is not a registry package by name (a URL, a git repository or a hosted-git shorthand)"


def _inside(snapshot: Path, folder: str, path: str) -> bool:
    """Whether `path` (relative to the repository folder `folder`) stays inside the repository,
    lexically and once links are followed."""
    path = path or "."  # `link:` alone: the manifest's own folder
    if path.startswith(("/", "~")) or "\\" in path:
        return False
    rel = posixpath.normpath(posixpath.join(folder, path))
    if rel == ".." or rel.startswith("../") or rel.startswith("/"):
        return False
    root = os.path.realpath(snapshot)
    real = os.path.realpath(snapshot / rel)
    return real == root or real.startswith(os.path.join(root, ""))


def _registry_url(url: str) -> bool:
    parts = urlsplit(url)
    hosts = set(REGISTRIES)
    configured = os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY")  # noqa: SIM112 (npm's)
    if configured:
        hosts.add(urlsplit(configured).hostname or "")
    return (
        parts.scheme in ("https", "http")
        and parts.hostname in hosts
        and not parts.username
        and bool(_REGISTRY_PATH.search(parts.path))
    )


def _resolved_problem(snapshot: Path, folder: str, value: object) -> str | None:
    """Why a lock file's `resolved` (or `version`, `tarball`) value is refused, or None."""
    if isinstance(value, bool):  # npm 6 writes `"resolved": false` for some bundled packages
        return None
    if not isinstance(value, str):
        return "is not a string"
    if value.startswith("npm:"):  # an alias, `npm:string-width@4.2.3`
        return _spec_problem(snapshot, folder, value)
    if "://" in value or value.startswith(("git+", "git:", "github:", "gitlab:", "bitbucket:", "gist:")):
        return None if _registry_url(value) else "is not a registry's tarball URL"
    if value.startswith(_LOCAL):
        return None if _inside(snapshot, folder, value.split(":", 1)[1]) else "names a path outside the repository"
    if value.startswith((".", "/", "~/")) or value.endswith(_TARBALL) or "/" in value:
        return None if _inside(snapshot, folder, value) else "names a path outside the repository"
    return None if _REGISTRY_SPEC.fullmatch(value) else "is not a registry package by name"


def _lock_problems(snapshot: Path, lock: str) -> list[str]:
    path = snapshot / lock
    if path.stat().st_size > _LOCK_BYTES:
        return [f"over {_LOCK_BYTES >> 20} MiB"]
    text = path.read_text(encoding="utf-8", errors="replace")
    if lock.endswith(".json"):
        return list(_npm_lock(snapshot, _json(path)))
    if lock == "yarn.lock":
        return list(_yarn_lock(snapshot, text))
    return list(_pnpm_lock(snapshot, text))


def _npm_lock(snapshot: Path, data: Any) -> Iterator[str]:
    """package-lock.json / npm-shrinkwrap.json, v1 (`dependencies`, nested) and v2/v3 (`packages`)."""
    if not isinstance(data, dict):
        return
    packages = data.get("packages")
    for key, entry in packages.items() if isinstance(packages, dict) else ():
        if key and "node_modules/" not in f"{key}/".replace("\\", "/") and not _inside(snapshot, "", key):
            yield f"packages[{key!r}] is a folder outside the repository"
        if not isinstance(entry, dict):
            continue
        if "resolved" in entry and (why := _resolved_problem(snapshot, "", entry["resolved"])):
            yield f"packages[{key!r}].resolved = {entry['resolved']!r} {why}"
        version = entry.get("version")
        registry = not isinstance(version, str) or _REGISTRY_SPEC.fullmatch(version)
        if not registry and (why := _resolved_problem(snapshot, "", version)):
            yield f"packages[{key!r}].version = {version!r} {why}"
    stack: list[tuple[str, Any, int]] = [("dependencies", data.get("dependencies"), 0)]
    while stack:
        where, deps, depth = stack.pop()
        for name, entry in deps.items() if isinstance(deps, dict) and depth < 50 else ():
            if not isinstance(entry, dict):
                continue
            for field in ("version", "resolved", "from"):
                value = entry.get(field)
                if field == "from" and isinstance(value, str) and value.startswith(f"{name}@"):
                    value = value[len(name) + 1 :]
                if value is None or (isinstance(value, str) and _REGISTRY_SPEC.fullmatch(value)):
                    continue
                if why := _resolved_problem(snapshot, "", value):
                    yield f"{where}.{name}.{field} = {value!r} {why}"
            stack.append((f"{where}.{name}.dependencies", entry.get("dependencies"), depth + 1))


def _yarn_lock(snapshot: Path, text: str) -> Iterator[str]:
    """yarn.lock v1: each entry's `name@spec` keys and its `resolved` URL."""
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")) and line.rstrip().endswith(":"):
            for key in line.rstrip()[:-1].split(","):
                key = key.strip().strip('"')
                at = key.find("@", 1)
                spec = key[at + 1 :] if at > 0 else ""
                if why := _spec_problem(snapshot, "", spec):
                    yield f"{key!r} {why}"
        elif (m := re.match(r'^\s+resolved\s+"?([^"\s]+)"?\s*$', line)) and (
            why := _resolved_problem(snapshot, "", m.group(1))
        ):
            yield f"resolved {m.group(1)!r} {why}"


def _pnpm_lock(snapshot: Path, text: str) -> Iterator[str]:
    """pnpm-lock.yaml, read without a YAML parser: a git resolution, a tarball URL or path, a
    directory, and every `link:`/`file:` value (relative to its importer's folder)."""
    importer, in_importers = "", False
    for line in text.splitlines():
        if re.match(r"^\S", line):
            in_importers = line.startswith("importers:")
            importer = ""
        elif in_importers and (m := re.match(r"^  (['\"]?)([^'\"\s:][^'\"]*?)\1:\s*$", line)):
            importer = "" if m.group(2) == "." else m.group(2)
        if re.search(r"\btype:\s*git\b|\brepo:\s", line):
            yield f"{line.strip()!r} names a git repository"
        for m in re.finditer(r"\btarball:\s*['\"]?([^'\",}\s]+)", line):
            if why := _resolved_problem(snapshot, "", m.group(1)):
                yield f"tarball {m.group(1)!r} {why}"
        for m in re.finditer(r"\bdirectory:\s*['\"]?([^'\",}\s]+)", line):
            if not _inside(snapshot, importer, m.group(1)):
                yield f"directory {m.group(1)!r} names a path outside the repository"
        for m in re.finditer(r"(?<![\w+])(link|file):([^'\",}\s)]+)", line):
            if not _inside(snapshot, importer, m.group(2)):
                yield f"{m.group(0)!r} names a path outside the repository"


def _pnpm_settings(snapshot: Path, text: str) -> Iterator[str]:
    """pnpm-workspace.yaml's settings that name host paths or other sources (_PNPM_REFUSED),
    and its patchedDependencies' patch files outside the repository."""
    section = ""
    for line in text.splitlines():
        if m := re.match(r"^['\"]?([\w-]+)['\"]?\s*:\s*['\"]?([^'\"#]*?)['\"]?\s*(#.*)?$", line):
            section, value = m.group(1), m.group(2)
            if section in _PNPM_REFUSED:
                yield f"the setting {section!r} is refused (another source the host's pnpm would use)"
            elif section in _PNPM_PATHS and not _inside(snapshot, "", value or "?"):
                yield f"the setting {section}: {value!r} names a path outside the repository"
        elif (
            section == "patchedDependencies"
            and (m := re.match(r"^\s+.+?:\s*['\"]?([^'\"#]+?)['\"]?\s*$", line))
            and not _inside(snapshot, "", m.group(1))
        ):
            yield f"patchedDependencies names {m.group(1)!r}, not a file inside the repository"
