"""Find the merged pull requests of a local clone, lazily, from its default branch's history.

GitHub merges a PR in one of three ways, and each leaves a trace on the first-parent history
of the default branch (the sequence of commits the branch pointed to):
- a merge commit "Merge pull request #N from owner/branch" (parents: the branch before, the
  PR's head). Base = merge-base of the two parents; the PR's diff = base..head.
- a squash merge: one ordinary commit whose subject ends in "(#N)". Base = its parent.
- a merge commit with any other message whose second parent is a `refs/pull/N/head` the clone
  has fetched (`git fetch origin '+refs/pull/*/head:refs/pull/*/head'`).
Rebase merges leave no trace that names the PR and are not recognised. The walk streams
`git log` output, so memory stays flat however long the history is. A PR number seen twice
(a revert and re-merge) keeps its newest merge only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from data.git.repo import GitError, Repo

_MERGE_RE = re.compile(r"^Merge pull request #(\d+) from (\S+)")
_SQUASH_RE = re.compile(r"^(.*?)\s*\(#(\d+)\)\s*$")
# GitHub's closing keywords, any case, optionally followed by a colon; the issue is "#N",
# "owner/name#N" or an issue URL. See GitHub's "Linking a pull request to an issue":
# https://docs.github.com/en/issues/tracking-your-work-with-issues/linking-a-pull-request-to-an-issue
_LINK_RE = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+"
    r"(?:https?://github\.com/([\w.-]+/[\w.-]+)/issues/|([\w.-]+/[\w.-]+)?#)(\d+)\b",
    re.IGNORECASE,
)
_LOG_FORMAT = "%H%x1f%P%x1f%an%x1f%ae%x1f%ct%x1f%B"


@dataclass(frozen=True)
class PullRequest:
    number: int
    kind: str  # "merge" | "squash" | "pull_ref": which rule above recognised it
    commit: str  # the merge or squash commit on the default branch
    parent: str  # the default branch just before the merge (the commit's first parent)
    head: str  # the PR's last commit (a merge's second parent; the squash commit itself)
    title: str
    body: str
    author: str  # "name <email>" of the squash commit; "" for merges (read from the PR's commits)
    source_branch: str  # "owner/branch" from a merge message, else ""
    merged_at: str  # ISO 8601 UTC committer date of `commit`


def linked_issues(texts: list[str], repo: str, own_number: int = -1) -> list[int]:
    """Issue numbers that `texts` say are closed ("Fixes #12", "closes owner/name#3"), sorted.

    References to other repositories and to the PR itself are ignored.
    """
    found: set[int] = set()
    for text in texts:
        for m in _LINK_RE.finditer(text):
            other = m.group(1) or m.group(2)
            if other and other.lower() != repo.lower():
                continue
            n = int(m.group(3))
            if n != own_number:
                found.add(n)
    return sorted(found)


def _iso(unix: str) -> str:
    return datetime.fromtimestamp(int(unix), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _split_message(message: str) -> tuple[str, str]:
    subject, _, rest = message.strip().partition("\n")
    return subject.strip(), rest.strip()


def _recognise(fields: list[str], pull_heads: dict[str, int]) -> PullRequest | None:
    sha, parents, name, email, ctime, message = fields
    parents_list = parents.split()
    subject, rest = _split_message(message)
    common = dict(commit=sha, merged_at=_iso(ctime))
    if len(parents_list) >= 2:
        m = _MERGE_RE.match(subject)
        number = int(m.group(1)) if m else pull_heads.get(parents_list[1])
        if number is None:
            return None
        if m:  # GitHub writes the PR title as the merge message's body
            title, body = _split_message(rest)
            kind, branch = "merge", m.group(2)
        else:
            title, body, kind, branch = subject, rest, "pull_ref", ""
        return PullRequest(
            number=number,
            kind=kind,
            parent=parents_list[0],
            head=parents_list[1],
            title=title,
            body=body,
            author="",
            source_branch=branch,
            **common,
        )
    m = _SQUASH_RE.match(subject)
    if not m or len(parents_list) != 1:
        return None
    return PullRequest(
        number=int(m.group(2)),
        kind="squash",
        parent=parents_list[0],
        head=sha,
        title=m.group(1),
        body=rest,
        author=f"{name} <{email}>",
        source_branch="",
        **common,
    )


def _records(repo: Repo, branch: str) -> Iterator[list[str]]:
    """`git log --first-parent` records, streamed: one list of fields per commit."""
    proc = repo.stream("log", "--first-parent", "-z", f"--format={_LOG_FORMAT}", branch, "--")
    assert proc.stdout is not None
    buf = b""
    try:
        while chunk := proc.stdout.read(1 << 16):
            buf += chunk
            *records, buf = buf.split(b"\0")
            for rec in records:
                yield rec.decode("utf-8", "replace").split("\x1f", 5)
        if buf:
            yield buf.decode("utf-8", "replace").split("\x1f", 5)
    finally:
        proc.stdout.close()
        rc = proc.wait()
    if rc != 0:
        err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
        raise GitError(f"{repo.path}: git log --first-parent {branch} failed: {err}")


def merged_pull_requests(repo: Repo, branch: str | None = None) -> Iterator[PullRequest]:
    """Merged PRs of `repo`'s default branch (or `branch`), newest first, each number once."""
    pull_heads = repo.pull_heads()
    seen: set[int] = set()
    for fields in _records(repo, branch or repo.default_branch()):
        if len(fields) != 6:
            continue  # a root commit of an empty log line
        pr = _recognise(fields, pull_heads)
        if pr is not None and pr.number not in seen:
            seen.add(pr.number)
            yield pr
