"""The repository's own code in a built environment: only the snapshot's.

An environment's packages come from a registry, and one of them can be the repository itself:
a dependency that requires it (a pytest plugin in pytest's repository, pytest in pluggy's) pulls
in a release, often a LATER one than the commit under test. That copy leaks the fix (the
tested code can read it), and it shadows the snapshot: the test process has site-packages
before the snapshot on its path (bootstrap.py, so that nothing of a patch stands in for the
runner), so a correct patch would be tested against the release and fail. node_modules has
the same problem: Node finds `require('own')` there, never in the repository's root.

So every environment built for a snapshot loses, after its last install and before anything
runs in it:

    Python   every distribution in site-packages that is the repository's own: its normalized
             name is the project's (declared.project_name: pyproject.toml, setup.cfg or a
             literal `name=` in setup.py), or every top-level import name it installs is one the
             snapshot provides (a copy under another distribution name). Its files are those
             its RECORD lists (top_level.txt where it has none): console scripts in bin/ too,
             its .dist-info last. Then any top-level entry left in site-packages that the
             snapshot provides as a regular package (a folder with an `__init__.py` that does
             not declare a namespace) or module (`name.py`, `name.*.so`) at its import roots:
             a dependency's stray `tests/` package, a vendored `six.py`. Namespace packages
             (`zope/`) are shared by several distributions and left alone.
    Node     every copy of the repository's own package (the root package.json's name, and
             each workspace's) under any node_modules folder of the layer: real folders, and
             links into a copy; a workspace's link to its own folder stays. Where one was
             removed, node_modules/<name> becomes a relative link to the package's folder in
             the repository (`..` for the root), so that a dependency requiring it loads the
             snapshot, as `npm link` or a workspace would.

What is removed is logged and returned. Names are read from the snapshot, never run.
"""

from __future__ import annotations

import csv
import email.parser
import io
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)

# An `__init__.py` that makes its folder a namespace shared with other distributions.
_NAMESPACE = re.compile(r"declare_namespace|extend_path|pkgutil|pkg_resources")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Bounds on what is read of a snapshot's import roots and of one distribution's metadata.
_ROOT_ENTRIES, _INIT_BYTES, _RECORD_BYTES = 20000, 4096, 16 << 20


def canonical(name: str) -> str:
    """A distribution's normalized name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def import_names(snapshot: Path, pythonpath: Iterable[str]) -> tuple[list[str], list[str]]:
    """The top-level names the snapshot provides for import at its roots (`pythonpath`):
    (regular packages (a folder with an `__init__.py` that declares no namespace), modules
    (`x.py`) and compiled modules (`x.cpython-311-x86_64-linux-gnu.so`); namespace portions (a
    folder of modules without one, or with one that declares a namespace): a regular package
    of that name in site-packages wins over them wherever the snapshot is on the path). Links
    are not followed."""
    found: set[str] = set()
    portions: set[str] = set()
    for root in dict.fromkeys(pythonpath):
        folder = snapshot / root
        if folder.is_symlink() or not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= _ROOT_ENTRIES:
                    break
                name = entry.name
                if entry.is_dir(follow_symlinks=False):
                    if not _IDENTIFIER.fullmatch(name):
                        continue
                    if _regular_package(Path(entry.path)):
                        found.add(name)
                    elif any(p.suffix == ".py" for p in Path(entry.path).iterdir()):
                        portions.add(name)
                elif entry.is_file(follow_symlinks=False):
                    stem = name[: -len(".py")] if name.endswith(".py") else name.split(".")[0] if ".so" in name else ""
                    if _IDENTIFIER.fullmatch(stem) and not stem.startswith("__"):
                        found.add(stem)
    return sorted(found), sorted(portions - found)


def _regular_package(folder: Path) -> bool:
    init = folder / "__init__.py"
    if init.is_symlink() or not init.is_file():
        return False
    with init.open("rb") as f:
        head = f.read(_INIT_BYTES).decode("utf-8", "replace")
    return not _NAMESPACE.search(head)


class _Distribution:
    """One installed distribution: its .dist-info folder, normalized name, and the files its
    RECORD lists (paths relative to site-packages)."""

    def __init__(self, info: Path) -> None:
        self.info = info
        self.name = canonical(_metadata_name(info) or info.name.split("-")[0])
        self.files = _record(info)

    def top_level(self) -> set[str]:
        """The import names it installs: its RECORD's first parts inside site-packages (its
        top_level.txt where it has no RECORD)."""
        if not self.files:
            text = _small(self.info / "top_level.txt")
            return {line.strip() for line in text.splitlines() if _IDENTIFIER.fullmatch(line.strip())}
        names = set()
        for rel in self.files:
            first = PurePosixPath(rel).parts[0] if PurePosixPath(rel).parts else ""
            if first in ("..", "__pycache__") or first.endswith((".dist-info", ".data", ".pth", ".egg-info")):
                continue
            stem = first[: -len(".py")] if first.endswith(".py") else first.split(".")[0]
            if _IDENTIFIER.fullmatch(stem):
                names.add(stem)
        return names


def _small(path: Path) -> str:
    if path.is_symlink() or not path.is_file():
        return ""
    with path.open("rb") as f:
        return f.read(_RECORD_BYTES).decode("utf-8", "replace")


def _metadata_name(info: Path) -> str | None:
    meta = email.parser.Parser().parsestr(_small(info / "METADATA"), headersonly=True)
    name = meta.get("Name")
    return str(name).strip() if name else None


def _record(info: Path) -> list[str]:
    rows = csv.reader(io.StringIO(_small(info / "RECORD")))
    return [row[0] for row in rows if row and row[0]]


def shadowing(
    site: Path, projects: Iterable[str], names: Iterable[str], portions: Iterable[str] = ()
) -> tuple[list[Path], list[Path]]:
    """What in `site` (a venv's site-packages) is the repository's own code: the .dist-info
    folders of the distributions named like one of `projects` (normalized) or whose import
    names are all among `names` (the snapshot's regular ones, import_names); and the top-level
    regular packages and modules named in `names` or `portions` that no such distribution
    installs (a namespace in site-packages is shared: left)."""
    own, provided = {canonical(p) for p in projects}, set(names)
    infos: list[Path] = []
    covered: set[str] = set()
    for info in sorted(site.glob("*.dist-info")):
        if info.is_symlink() or not info.is_dir():
            continue
        dist = _Distribution(info)
        top = dist.top_level()
        if dist.name in own or (top and top <= provided):
            infos.append(info)
            covered |= top
    left = [entry for name in sorted((provided | set(portions)) - covered) for entry in entries(site, name)]
    return infos, left


def remove_python(site: Path, projects: Iterable[str], names: Iterable[str], portions: Iterable[str] = ()) -> list[str]:
    """Remove the repository's own code from `site` (shadowing's): each distribution's files
    (those its RECORD lists inside the venv, then its regular top-level packages and modules,
    then its .dist-info), then the entries left. Returns what was removed, one line each."""
    infos, left = shadowing(site, projects, names, portions)
    removed: list[str] = []
    venv = site.parents[2] if len(site.parents) > 2 else site  # <venv>/lib/pythonX.Y/site-packages
    for info in infos:
        dist = _Distribution(info)
        for rel in dist.files:
            _unlink_inside(site / rel, venv)
        for name in dist.top_level():
            for entry in entries(site, name):
                _remove_path(entry)
        _prune(site, {PurePosixPath(rel).parts[0] for rel in dist.files if PurePosixPath(rel).parts})
        shutil.rmtree(info, ignore_errors=True)
        removed.append(f"{info.name} (the repository's own distribution)")
    for entry in left:
        _remove_path(entry)
        removed.append(f"{entry.name} (a package of the snapshot's)")
    for line in removed:
        log.info("[env] %s: removed %s: the code under test is the snapshot's", site, line)
    return removed


def entries(site: Path, name: str) -> list[Path]:
    """site-packages' top-level entries that import as `name`: its package folder (namespace
    ones left), its module, its compiled modules."""
    found = []
    folder = site / name
    if folder.is_symlink() or (folder.is_dir() and _regular_package(folder)):
        found.append(folder)
    found += [p for p in (site / f"{name}.py",) if p.is_file() or p.is_symlink()]
    found += [*site.glob(f"{name}.*.so"), *site.glob(f"{name}.so")]
    return found


def _remove_path(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _unlink_inside(path: Path, venv: Path) -> None:
    """Remove a file a RECORD lists, when it lies inside the venv (a RECORD is data)."""
    target = Path(os.path.normpath(path))
    if target.is_relative_to(venv) and (target.is_symlink() or target.is_file()):
        target.unlink()


def _prune(site: Path, tops: set[str]) -> None:
    """Folders under `tops` that removal emptied, and caches of removed modules."""
    for top in tops:
        folder = site / top
        if top in ("", ".", "..") or top.endswith((".dist-info", ".data")) or folder.is_symlink():
            continue  # `../../../bin/x` (a script) is not a folder of site-packages
        if not folder.is_dir():
            continue
        for here, _dirs, files in sorted(os.walk(folder), key=lambda w: -len(w[0])):
            path = Path(here)
            if path.name == "__pycache__":
                for name in files:
                    if not (path.parent / f"{name.split('.')[0]}.py").exists():
                        (path / name).unlink(missing_ok=True)
            if not any(path.iterdir()):
                path.rmdir()


def js_names(snapshot: Path, workspaces: Iterable[str]) -> dict[str, str]:
    """The repository's own package names -> their folder in the repository ("." for the root):
    the root package.json's `name` and each workspace's (`workspaces`: their package.json paths)."""
    found: dict[str, str] = {}
    for rel in ["package.json", *workspaces]:
        name = _package_name(snapshot / rel)
        if name and name not in found:
            found[name] = str(PurePosixPath(rel).parent)
    return found


def _package_name(path: Path) -> str | None:
    try:
        manifest = json.loads(_small(path) or "null")
    except ValueError:
        return None
    name = manifest.get("name") if isinstance(manifest, dict) else None
    valid = isinstance(name, str) and re.fullmatch(r"(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*", name, re.I)
    return name if valid and ".." not in str(name) else None


def remove_js(layer: Path, own: dict[str, str]) -> list[str]:
    """Remove every copy of the packages `own` names (js_names) under the node_modules folders
    of `layer` (an environment's folder laid over the snapshot: layer/node_modules is
    /testbed/node_modules), and link node_modules/<name> to the package's folder in the
    repository where one was removed. Returns the paths removed, relative to `layer`."""
    modules = layer / "node_modules"
    if not own or modules.is_symlink() or not modules.is_dir():
        return []
    removed: list[str] = []
    for here, dirs, _files in os.walk(modules):  # links are not followed
        folder = Path(here)
        if folder.name != "node_modules" and not (folder.name.startswith("@") and folder.parent.name == "node_modules"):
            continue
        for name in sorted({*dirs, *(e.name for e in os.scandir(folder) if e.is_symlink())}):
            package = f"{folder.name}/{name}" if folder.name.startswith("@") else name
            path = folder / name
            if package not in own:
                continue
            if path.is_symlink() and not _links_into_node_modules(path, layer):
                continue  # a workspace's link to its own folder in the repository
            _remove_path(path)
            if name in dirs:
                dirs.remove(name)
            removed.append(str(path.relative_to(layer)))
    for package in sorted({p.split("node_modules/")[-1] for p in removed}):
        slot = modules / package
        if not slot.exists() and not slot.is_symlink():
            slot.parent.mkdir(parents=True, exist_ok=True)
            up = "../" * (package.count("/") + 1)
            slot.symlink_to(os.path.normpath(up + own[package]) if own[package] != "." else up.rstrip("/"))
    for line in removed:
        log.info("[env] %s: removed %s (the repository's own package: the snapshot's is tested)", layer, line)
    return removed


def _links_into_node_modules(link: Path, layer: Path) -> bool:
    """Whether a link (read as text, never followed) points at a folder under a node_modules
    folder: a copy of the package (pnpm's .pnpm store), not a workspace's folder."""
    target = PurePosixPath(os.path.normpath(link.parent / os.readlink(link)))
    try:
        parts = target.relative_to(layer).parts
    except ValueError:
        return False
    return "node_modules" in parts
