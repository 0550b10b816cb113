"""`python -m data.gharchive`: GH Archive hourly dumps -> the issue dump `data.build --issues` reads.

    python -m data.gharchive --input DIR_OR_GLOB [--input ...] --out FILE [--repos FILE]
    python -m data.gharchive ... --workers 2             # Ray Data on a local Ray (127.0.0.1)
    python -m data.gharchive ... --ray-address auto      # Ray Data on an existing cluster

GH Archive (https://www.gharchive.org) logs every public GitHub event, one gzipped JSON-lines
file per hour. The paper starts from these events: it keeps merged pull requests, links each
to the issues it resolves and aggregates the issue text with its discussion. This does the
same, as three stages that run in-process or as a streaming Ray Data pipeline:

1. per file (`file_facts`, Ray Data `flat_map`): each event -> small "facts" keyed by
   `owner/name#N` (a merged PR, an issue's text, a comment, a "PR #M resolves this issue" link,
   a "this number is a PR" mark). Issues and PRs share GitHub's number space, so one key serves
   both. Most events (pushes, stars, forks) give nothing, so what is shuffled is small.
2. per key (`aggregate`, Ray Data `groupby(key).map_groups`): the merged PR's record; an
   issue's record when a merged PR resolves it: its newest title and body, followed by its
   comments in time order (an edited comment keeps its last text, a deleted one is left out).
   The link travels as a fact to the issue's own key, so this one shuffle is the join.
3. the driver writes the records, REST issue objects (a PR is one with a `pull_request` key),
   as JSON lines (`.gz` when the name ends so), atomically: a failed run leaves no file.

Linked issues follow data.git.pulls' closing-keyword rule (`fixes #N`, `closes owner/name#N` of the
same repository, an issue URL) in the PR's title and body; data.build applies the same rule to
the same text again, and to the PR's commit messages, which the events do not carry.

How this departs from the paper: review comments (PullRequestReviewCommentEvent) and comments on
the PR itself are counted but not kept: they quote and discuss the patch, and data.build's
problem statement is the issue's text (or, without an issue, the PR's), which must not carry
the answer. The paper does not say how it renders a discussion; here each comment is a
paragraph `<login> commented at <time>:` followed by its text, appended to the issue's body
(`--no-discussion` keeps the body alone). An issue opened before the first dump read is still
found when a comment event later than it is read: those events carry the issue's text.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from actors.cluster.join import ray_session
from conf.errors import UserError, fail
from conf.io import atomic_write, check_output
from data.git.pulls import linked_issues
from data.mining.sources import InputError, read_excluded_repos

Fact = dict[str, str]  # {"key": "owner/name#N", "kind": ..., "time": ISO 8601, "data": JSON}
STATS_KEY = ""  # the key of every file's event counts: one small group


@dataclass(frozen=True)
class ArchiveConfig:
    # GH Archive files (.json.gz / .json), directories of them, or glob patterns.
    inputs: tuple[str, ...] = ()
    # Output issue dump: JSON lines, gzipped when the name ends in .gz.
    out: str = ""
    # Keep only these repositories: a text file of owner/name lines or a SWE-bench file; "" = all.
    repos: str = ""
    # Append each linked issue's comments, in time order, to its body.
    discussion: bool = True
    # Local Ray CPUs to run the Ray Data pipeline on (0 = in-process, unless `ray_address`).
    workers: int = 0
    # Address of an existing Ray cluster ("auto", "ray://host:10001"); "" = none.
    ray_address: str = ""


# ---------------------------------------------------------------------------------------------
# Stage 1: one event -> facts


def _get(obj: Any, path: str, where: str) -> Any:
    """obj[a][b]... for path "a.b"; InputError naming the field when it is absent."""
    for part in path.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            raise InputError(f"{where}: missing field {path!r}")
        obj = obj[part]
    return obj


def _login(obj: Mapping[str, Any]) -> str:
    user = obj.get("user")
    return str(user.get("login") or "") if isinstance(user, Mapping) else ""


def _fact(repo: str, number: int, kind: str, when: str, data: Any = None) -> Fact:
    return {"key": f"{repo}#{number}", "kind": kind, "time": when, "data": json.dumps(data, sort_keys=True)}


def event_facts(event: Any, where: str, repos: frozenset[str] | None = None) -> list[Fact]:
    """The facts one GH Archive event gives (most give none); `repos` (lower case) keeps only
    their events. InputError names the field of a relevant event that is missing."""
    if not isinstance(event, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(event).__name__}")
    kind = event.get("type")
    if kind not in _HANDLERS:
        return []
    repo = str(_get(event, "repo.name", where))
    if repos is not None and repo.lower() not in repos:
        return []
    payload = _get(event, "payload", where)
    return _HANDLERS[kind](repo, str(event.get("created_at") or ""), payload, where)


def _pull_request(repo: str, when: str, payload: Any, where: str) -> list[Fact]:
    pr = _get(payload, "pull_request", where + ": payload")
    number = int(_get(pr, "number", where + ": payload.pull_request"))
    facts = [_fact(repo, number, "is_pull", when)]
    if _get(payload, "action", where + ": payload") != "closed" or not pr.get("merged"):
        return facts
    title, body = str(pr.get("title") or ""), str(pr.get("body") or "")
    record = {"title": title, "body": body, "author": _login(pr), "merged_at": str(pr.get("merged_at") or when)}
    facts.append(_fact(repo, number, "pull", when, record))
    for issue in linked_issues([title, body], repo, number):
        facts.append(_fact(repo, issue, "link", when, number))
    return facts


def _issue_text(issue: Mapping[str, Any]) -> dict[str, str]:
    return {
        "title": str(issue.get("title") or ""),
        "body": str(issue.get("body") or ""),
        "author": _login(issue),
        "created_at": str(issue.get("created_at") or ""),
    }


def _issues(repo: str, when: str, payload: Any, where: str) -> list[Fact]:
    issue = _get(payload, "issue", where + ": payload")
    number = int(_get(issue, "number", where + ": payload.issue"))
    return [_fact(repo, number, "issue", when, _issue_text(issue))]


def _issue_comment(repo: str, when: str, payload: Any, where: str) -> list[Fact]:
    issue = _get(payload, "issue", where + ": payload")
    number = int(_get(issue, "number", where + ": payload.issue"))
    if "pull_request" in issue:  # a comment on a PR: its discussion of the patch is not kept
        return [_fact(repo, number, "is_pull", when)]
    comment = _get(payload, "comment", where + ": payload")
    record = {
        "id": int(_get(comment, "id", where + ": payload.comment")),
        "action": str(payload.get("action") or "created"),
        "author": _login(comment),
        "created_at": str(comment.get("created_at") or when),
        "body": str(comment.get("body") or ""),
    }
    # The event carries the issue as it is now: an issue opened before the first dump is found.
    return [_fact(repo, number, "issue", when, _issue_text(issue)), _fact(repo, number, "comment", when, record)]


def _review_comment(repo: str, when: str, payload: Any, where: str) -> list[Fact]:
    number = int(_get(payload, "pull_request.number", where + ": payload"))
    return [_fact(repo, number, "is_pull", when)]


_HANDLERS: dict[str, Callable[[str, str, Any, str], list[Fact]]] = {
    "PullRequestEvent": _pull_request,
    "IssuesEvent": _issues,
    "IssueCommentEvent": _issue_comment,
    "PullRequestReviewCommentEvent": _review_comment,
}


def _open_text(path: str) -> IO[str]:
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def file_facts(path: str, repos: frozenset[str] | None = None) -> Iterator[Fact]:
    """Every fact of one GH Archive file, then one stats fact: its events counted by type.
    InputError names the file (and line) that cannot be read."""
    counts: Counter[str] = Counter()
    lineno = 0
    try:
        with _open_text(path) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{path}: line {lineno}"
                try:
                    event = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"{where}: malformed JSON line ({e.msg})") from None
                counts[str(event.get("type") if isinstance(event, Mapping) else "?")] += 1
                yield from event_facts(event, where, repos)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:  # not gzip, truncated, not UTF-8
        raise InputError(f"{path}: unreadable after line {lineno} ({type(e).__name__}: {e})") from None
    yield {"key": STATS_KEY, "kind": "stats", "time": "", "data": json.dumps(dict(counts), sort_keys=True)}


# ---------------------------------------------------------------------------------------------
# Stage 2: the facts of one key -> records


def _comments(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comments of one issue in time order: the last event of a comment id decides it."""
    last: dict[int, dict[str, Any]] = {}
    for f in facts:  # in event-time order
        last[f["id"]] = f
    alive = [c for c in last.values() if c["action"] != "deleted"]
    return sorted(alive, key=lambda c: (c["created_at"], c["id"]))


def with_discussion(body: str, comments: list[dict[str, Any]]) -> str:
    """The issue body followed by one paragraph per comment, as data.build's statement shows it."""
    parts = [body] + [f"{c['author'] or 'someone'} commented at {c['created_at']}:\n{c['body']}" for c in comments]
    return "\n\n".join(p for p in parts if p)


def aggregate(key: str, facts: Iterable[Fact], discussion: bool = True) -> list[dict[str, str]]:
    """Output rows {"kind": "pull" | "issue" | "stats", "record": JSON} of one key's facts."""
    by_kind: defaultdict[str, list[Any]] = defaultdict(list)  # the decoded `data` of each fact
    # Event time, then the text: a deterministic order whatever order the shuffle delivered.
    for f in sorted(facts, key=lambda f: (f["time"], f["kind"], f["data"])):
        by_kind[f["kind"]].append(json.loads(f["data"]))
    if key == STATS_KEY:
        total: Counter[str] = Counter()
        for counts in by_kind["stats"]:
            total.update(counts)
        errors: list[dict[str, str]] = [{"kind": "error", "record": m} for m in sorted(by_kind["error"])]
        return [*errors, {"kind": "stats", "record": json.dumps(dict(sorted(total.items())))}]
    repo, number = key.rsplit("#", 1)
    if by_kind["pull"]:
        return [{"kind": "pull", "record": json.dumps(_pull_record(repo, int(number), by_kind["pull"][-1]))}]
    if by_kind["is_pull"] or not by_kind["link"] or not by_kind["issue"]:
        return []  # a PR not merged, or an issue no merged PR resolves, or one never seen
    issue = by_kind["issue"][-1]
    comments = _comments(by_kind["comment"])
    body = with_discussion(issue["body"], comments) if discussion else issue["body"]
    record = {
        "number": int(number),
        "title": issue["title"],
        "body": body,
        "user": {"login": issue["author"]},
        # The opening time: comment events carry the issue without it, the IssuesEvent with it.
        "created_at": next((i["created_at"] for i in by_kind["issue"] if i["created_at"]), ""),
        "comments": len(comments),
        "html_url": f"https://github.com/{repo}/issues/{number}",
        "repository_url": f"https://api.github.com/repos/{repo}",
        "resolved_by": sorted(set(by_kind["link"])),
    }
    return [{"kind": "issue", "record": json.dumps(record)}]


def _pull_record(repo: str, number: int, pr: dict[str, Any]) -> dict[str, Any]:
    """A REST issue object of a merged PR: data.build reads a `pull_request` key as a PR."""
    url = f"https://github.com/{repo}/pull/{number}"
    return {
        "number": number,
        "title": pr["title"],
        "body": pr["body"],
        "user": {"login": pr["author"]},
        "html_url": url,
        "repository_url": f"https://api.github.com/repos/{repo}",
        "pull_request": {"html_url": url, "merged_at": pr["merged_at"]},
    }


# ---------------------------------------------------------------------------------------------
# Running the stages: in-process, or as a Ray Data pipeline


def expand_inputs(patterns: Iterable[str]) -> list[str]:
    """The files named by `patterns` (files, directories searched for *.json.gz / *.json, globs),
    sorted and without repeats; InputError names a pattern that matches nothing."""
    files: set[str] = set()
    for pattern in patterns:
        p = Path(pattern)
        if p.is_dir():
            found = [str(f) for ext in ("*.json.gz", "*.json") for f in p.rglob(ext) if f.is_file()]
        elif p.is_file():
            found = [str(p)]
        else:
            found = [f for f in glob.glob(pattern, recursive=True) if Path(f).is_file()]
        if not found:
            raise InputError(f"{pattern}: no such file, or no GH Archive file (*.json.gz, *.json) there")
        files.update(found)
    return sorted(files)


def run_in_process(
    files: list[str], repos: frozenset[str] | None, discussion: bool, progress: Callable[[int], None]
) -> Iterator[dict[str, str]]:
    """Stages 1 and 2 here: every key's facts held in memory (a test or a few hours of dumps)."""
    groups: defaultdict[str, list[Fact]] = defaultdict(list)
    for done, path in enumerate(files, 1):
        for fact in file_facts(path, repos):
            groups[fact["key"]].append(fact)
        progress(done)
    for key in sorted(groups):
        yield from aggregate(key, groups[key], discussion)


def _facts_of_row(row: dict[str, Any], repos: frozenset[str] | None) -> list[Fact]:
    """One file's facts in a Ray task. A bad file becomes an "error" fact, a value: Ray Data
    hands the driver a UserCodeException that no longer holds the InputError and its message."""
    try:
        return list(file_facts(row["path"], repos))
    except InputError as e:
        return [{"key": STATS_KEY, "kind": "error", "time": "", "data": json.dumps(str(e))}]


def _aggregate_batch(group: Any, discussion: bool) -> dict[str, list[str]]:
    rows = group.to_pylist()  # one key's facts (a pyarrow.Table)
    out = aggregate(rows[0]["key"], rows, discussion) if rows else []
    return {"kind": [r["kind"] for r in out], "record": [r["record"] for r in out]}


def run_on_ray(
    files: list[str], repos: frozenset[str] | None, discussion: bool, partitions: int
) -> Iterator[dict[str, str]]:
    """Stages 1 and 2 as a streaming Ray Data pipeline: one read task per file (the files must
    be at the same path on every node: a shared file system), a sort-based shuffle on the key
    into `partitions` (Ray Data's default, 200, costs seconds of tasks on a small input)."""
    # Ray Data: only for --workers / --ray-address
    import ray.data
    from ray.data.context import ShuffleStrategy

    # The sort-based shuffle: on 2 CPUs it ran the whole pipeline in 13.5 s where 2.60's
    # default hash shuffle took 25 s (400k generated events; docs/benchmarks.md).
    ray.data.DataContext.get_current().shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    ds = ray.data.from_items([{"path": f} for f in files], override_num_blocks=len(files))
    ds = ds.flat_map(_facts_of_row, fn_kwargs={"repos": repos})
    ds = ds.groupby("key", num_partitions=partitions).map_groups(
        _aggregate_batch, fn_kwargs={"discussion": discussion}, batch_format="pyarrow"
    )
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=1024):
        yield from batch.to_pylist()


def write_dump(rows: Iterable[dict[str, str]], out: str) -> Counter[str]:
    """Write the pull and issue records as JSON lines through an atomic rename; return the
    counts: records by kind, and the input's events by type (prefixed "events:"). An error row
    (a bad file, from a Ray task) raises InputError: the file is not written."""
    counts: Counter[str] = Counter()
    with atomic_write(out, "wb") as raw:
        f = cast("IO[bytes]", gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)) if out.endswith(".gz") else raw
        for row in rows:
            if row["kind"] == "error":
                raise InputError(row["record"])
            if row["kind"] == "stats":
                counts.update({f"events:{k}": v for k, v in json.loads(row["record"]).items()})
                continue
            counts[row["kind"]] += 1
            f.write(row["record"].encode("utf-8") + b"\n")
        if f is not raw:
            f.close()  # the gzip trailer, before atomic_write's fsync and rename
    return counts


def summary(counts: Counter[str], files: int, seconds: float) -> str:
    events = sum(v for k, v in counts.items() if k.startswith("events:"))
    by_type = ", ".join(f"{k[7:]} {v}" for k, v in counts.most_common() if k.startswith("events:"))
    return (
        f"{files} files, {events} events ({events / max(seconds, 1e-9):,.0f}/s) -> {counts['pull']} merged PRs, "
        f"{counts['issue']} issues they resolve ({seconds:.1f} s)\nevents by type: {by_type}"
    )


def convert(cfg: ArchiveConfig) -> Counter[str]:
    """Run the whole conversion; return write_dump's counts."""
    if not cfg.out:
        raise InputError("--out FILE is required")
    if cfg.workers < 0:
        raise InputError(f"workers must be >= 0 (0 = in-process), got {cfg.workers}")
    if not cfg.inputs:
        raise InputError("--input DIR_OR_GLOB is required")
    files = expand_inputs(cfg.inputs)
    check_output(cfg.out, files, what="--out")

    repos = read_excluded_repos((cfg.repos,), flag="--repos") if cfg.repos else None
    started = time.monotonic()

    def progress(done: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-9)
        print(f"[gharchive] {done}/{len(files)} files read ({rate:.2f} files/s)", file=sys.stderr, flush=True)

    if not (cfg.workers or cfg.ray_address):
        counts = write_dump(run_in_process(files, repos, cfg.discussion, progress), cfg.out)
    else:
        # Ray Data shows its own progress bars (rows per operator) on stderr while it runs.
        with ray_session(cfg.ray_address, cfg.workers) as cpus:
            # A few partitions per CPU: each reduce task holds its keys' facts in memory.
            counts = write_dump(run_on_ray(files, repos, cfg.discussion, partitions=4 * cpus), cfg.out)
    print(f"[gharchive] {summary(counts, len(files), time.monotonic() - started)}", file=sys.stderr, flush=True)
    return counts


def parse_args(argv: list[str] | None = None) -> ArchiveConfig:
    """Flags map one to one onto ArchiveConfig's fields; the defaults live there."""
    d = ArchiveConfig()
    ap = argparse.ArgumentParser(
        prog="python -m data.gharchive",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--input", action="append", required=True, help="GH Archive file, directory or glob (repeatable)")
    ap.add_argument("--out", required=True, help="issue dump to write (.jsonl, or .jsonl.gz to gzip it)")
    ap.add_argument(
        "--repos",
        default=d.repos,
        help="keep only these repositories: owner/name lines or a SWE-bench file (default: all)",
    )
    ap.add_argument(
        "--discussion",
        action=argparse.BooleanOptionalAction,
        default=d.discussion,
        help="append each issue's comments, in time order, to its body (default: on)",
    )
    ap.add_argument("--workers", type=int, default=d.workers, help="local Ray CPUs (default: 0 = in-process)")
    ap.add_argument("--ray-address", default=d.ray_address, help="an existing Ray cluster (default: none)")
    ns = ap.parse_args(argv)
    return ArchiveConfig(
        inputs=tuple(ns.input),
        out=ns.out,
        repos=ns.repos,
        discussion=ns.discussion,
        workers=ns.workers,
        ray_address=ns.ray_address,
    )


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    try:
        convert(cfg)
    except UserError as e:
        fail("python -m data.gharchive", str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
