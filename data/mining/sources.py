"""Readers for the non-git inputs: GitHub issue dumps and SWE-bench-format files.

Issue dumps (`--issues`): JSON (an array or one object) or JSON lines, optionally gzipped, of
- GitHub REST API issue objects (`/repos/{o}/{r}/issues`: a PR is an issue with a
  `pull_request` key) and pull-request objects (`/pulls`: they carry `head` and `base`), and
- GH Archive events: `IssuesEvent` (payload.issue) and `PullRequestEvent` (payload.pull_request);
  other event types are skipped.
Records of other repositories are skipped when the record names its repository. A number seen
again (GH Archive logs every edit) keeps its last text. The index holds only titles and
bodies of one repository, so it stays small next to the history being mined.

SWE-bench files (`--swebench`): JSON, JSON lines or Parquet rows with instance_id, repo,
base_commit, problem_statement and patch (`golden_patch`, the name SWE-bench Lite exports use,
is read when `patch` is absent). Rows are streamed. Bad input raises InputError naming the
file, the line (or row) and the field.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from conf.errors import UserError

SWEBENCH_REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "patch")


class InputError(UserError, ValueError):
    """An input file is malformed; the message names the file, the line or row, and the field."""


@dataclass(frozen=True)
class IssueText:
    title: str
    body: str
    author: str  # the GitHub login of whoever opened it ("" when the record has none)


@dataclass
class IssueIndex:
    """Issue and pull-request texts of one repository, by number."""

    issues: dict[int, IssueText] = field(default_factory=dict)
    pulls: dict[int, IssueText] = field(default_factory=dict)


def _open(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def iter_json_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, record) for each record of a JSON-lines file, or of a JSON array or object."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with _open(path) as f:
        first = f.readline()
        try:
            first_record = json.loads(first) if first.strip() else None
        except json.JSONDecodeError:
            first_record = None
        if first_record is None or isinstance(first_record, list):
            # Not JSON lines: one document (an array of records or a single object).
            text = first + f.read()
            if not text.strip():
                return
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {e.lineno}: malformed JSON ({e.msg})") from None
            for i, rec in enumerate(doc if isinstance(doc, list) else [doc]):
                yield f"{path}: item {i}", rec
            return
        yield f"{path}: line 1", first_record
        for lineno, line in enumerate(f, 2):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {lineno}: malformed JSON line ({e.msg})") from None
            yield f"{path}: line {lineno}", rec


def _need(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, Mapping) or key not in obj:
        raise InputError(f"{where}: missing field {key!r}")
    return obj[key]


def _text(obj: Mapping[str, Any], where: str) -> tuple[int, IssueText]:
    number = _need(obj, "number", where)
    if not isinstance(number, int):
        raise InputError(f"{where}: field 'number' must be an integer, got {number!r}")
    title = _need(obj, "title", where)
    user = obj["user"] if isinstance(obj.get("user"), Mapping) else {}
    return number, IssueText(
        title=str(title or ""), body=str(obj.get("body") or ""), author=str(user.get("login") or "")
    )


def _repo_of(rec: Mapping[str, Any]) -> str | None:
    """ "owner/name" a record says it belongs to, or None when it does not say."""
    if isinstance(rec.get("repo"), Mapping) and "name" in rec["repo"]:
        return str(rec["repo"]["name"])
    for key in ("repository_url", "html_url", "url"):
        url = rec.get(key)
        if isinstance(url, str) and "github.com" in url:
            parts = url.split("github.com/", 1)[1].split("/")
            parts = parts[1:] if parts[0] == "repos" else parts
            if len(parts) >= 2:
                return f"{parts[0]}/{parts[1]}"
    return None


def _classify(rec: Any, where: str) -> tuple[str, Mapping[str, Any]] | None:
    """("issue" | "pull", object) of one dump record, None for records that hold neither."""
    if not isinstance(rec, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if "type" in rec and "payload" in rec:  # a GH Archive event
        payload = rec["payload"]
        if rec["type"] == "IssuesEvent":
            return "issue", _need(payload, "issue", where + ": payload")
        if rec["type"] == "PullRequestEvent":
            return "pull", _need(payload, "pull_request", where + ": payload")
        return None
    if "pull_request" in rec or ("head" in rec and "base" in rec):
        return "pull", rec
    return "issue", rec


def read_issue_index(paths: list[str], repo: str) -> IssueIndex:
    """Index every issue and PR of `repo` found in the dump files `paths`."""
    index = IssueIndex()
    for path in paths:
        for where, rec in iter_json_records(path):
            kind_obj = _classify(rec, where)
            if kind_obj is None:
                continue
            kind, obj = kind_obj
            owner = _repo_of(rec) or _repo_of(obj)
            if owner is not None and owner.lower() != repo.lower():
                continue
            number, text = _text(obj, where)
            (index.pulls if kind == "pull" else index.issues)[number] = text
    return index


def _rows_parquet(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    i = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
            for row in batch.to_pylist():
                yield f"{path}: row {i}", row
                i += 1
    except (pa.ArrowException, OSError) as exc:  # truncated, corrupt (a bad ZSTD frame names no file)
        raise InputError(f"{path}: not a readable Parquet file after row {i} ({exc})") from None


def iter_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, record) of a Parquet file's rows, or of a JSON / JSON-lines file's records."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return _rows_parquet(path) if path.suffix == ".parquet" else iter_json_records(path)


def iter_swebench_rows(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each SWE-bench-format row; InputError names a missing field."""
    for where, row in iter_records(path):
        if not isinstance(row, Mapping):
            raise InputError(f"{where}: expected a JSON object, got {type(row).__name__}")
        row = dict(row)
        if "patch" not in row and "golden_patch" in row:
            row["patch"] = row["golden_patch"]
        for key in SWEBENCH_REQUIRED:
            if not isinstance(row.get(key), str):
                raise InputError(f"{where}: field {key!r} is missing or not a string")
        yield where, row


_REPO_RE = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def read_excluded_repos(paths: tuple[str, ...], flag: str = "--exclude-repos") -> frozenset[str]:
    """Repositories to exclude, lower case, from the files `paths` (see BuildConfig.exclude_repos);
    errors name `flag`, the switch that gave the files (data.build's --exclude-repos, data.gharchive's --repos)."""
    repos: set[str] = set()
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: no such file ({flag})")
        if p.suffix in (".parquet", ".json", ".jsonl", ".gz"):
            entries = ((where, rec.get("repo") if isinstance(rec, dict) else None) for where, rec in iter_records(p))
        else:
            lines = enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            entries = ((f"{p}: line {n}", ln.strip()) for n, ln in lines if ln.strip() and not ln.startswith("#"))
        for where, repo in entries:
            if not (isinstance(repo, str) and _REPO_RE.fullmatch(repo)):
                raise InputError(f"{where}: expected a repository as owner/name, got {repo!r} ({flag})")
            repos.add(repo.lower())
    return frozenset(repos)
