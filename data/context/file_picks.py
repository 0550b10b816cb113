"""Asking a model to name files of a repository, and reading its answer robustly.

Two stages ask a model for paths: localization in the Agentless-Mini evaluation (which files to
change for an issue) and `--context model` in the data builder (which unchanged files are
relevant to an issue and its changed files). Both show the model the repository's tree and
read back a list of paths; the prompts differ and live with their callers, the tree rendering
and the answer reader live here, pure and shared.

A small model's answer is rarely a clean list: paths come numbered, bulleted, in backticks,
with `./` or `a/` prefixes, inside prose, or cut to a suffix ("models.py" for
"requests/models.py"). `read_picks` takes every path-like token in order, maps it to a path of
the repository (exact first, then a unique suffix match at a directory boundary), drops
duplicates, keeps at most `limit`, and counts what it could not map (`unknown`), so that a
caller reports how often the model named files that do not exist instead of failing on them.
A token counts as unknown only when it looks like a file of this repository (it has a slash,
or an extension some repository file has): "e.g." or "session.send" in prose are not files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# A path-like token: at least one character class of file names, with an extension or a slash.
_TOKEN_RE = re.compile(r"[A-Za-z0-9_.\-/]*[A-Za-z0-9_\-]\.[A-Za-z0-9_]+|[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+")
# Prefixes a model (or a diff) puts before a repository path.
_PREFIXES = ("./", "a/", "b/", "/")


@dataclass(frozen=True)
class Picks:
    paths: list[str] = field(default_factory=list)  # repository paths, in the answer's order, deduplicated
    unknown: list[str] = field(default_factory=list)  # path-like tokens naming no file of the repository


def render_tree(paths: Iterable[str]) -> str:
    """The repository's files as an indented tree: directories end with '/', two spaces per level.

    Shorter than the flat list for deep trees, and the form the paper's localization shows.
    """
    lines: list[str] = []
    shown: set[str] = set()
    for path in sorted(set(paths)):
        parts = path.split("/")
        for depth in range(len(parts) - 1):
            directory = "/".join(parts[: depth + 1])
            if directory not in shown:
                shown.add(directory)
                lines.append("  " * depth + parts[depth] + "/")
        lines.append("  " * (len(parts) - 1) + parts[-1])
    return "\n".join(lines)


def _normalize(token: str) -> str:
    token = token.strip().strip("`'\"*,;:()[]<>").rstrip(".")
    for prefix in _PREFIXES:
        if token.startswith(prefix):
            token = token[len(prefix) :]
    return token


def read_picks(text: str, known: Iterable[str], limit: int) -> Picks:
    """The first `limit` distinct repository paths named in `text`, and the tokens naming none.

    A token maps to a known path when equal to it, or when exactly one known path ends with
    "/" + token (a suffix cut at a directory boundary); an ambiguous suffix is unknown.
    """
    known_set = set(known)
    extensions = {p.rsplit(".", 1)[1] for p in known_set if "." in p.rsplit("/", 1)[-1]}
    by_name: dict[str, list[str]] = {}
    for path in known_set:
        parts = path.split("/")
        for i in range(1, len(parts)):
            by_name.setdefault("/".join(parts[i:]), []).append(path)
    paths: list[str] = []
    unknown: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        token = _normalize(match.group(0))
        if not token or ("/" not in token and "." not in token):
            continue
        if token in known_set:
            path = token
        elif len(by_name.get(token, [])) == 1:
            path = by_name[token][0]
        else:
            looks_like_file = "/" in token or token.rsplit(".", 1)[-1] in extensions
            if looks_like_file and token not in unknown:
                unknown.append(token)
            continue
        if path not in paths:
            paths.append(path)
    return Picks(paths[:limit] if limit > 0 else [], unknown)
