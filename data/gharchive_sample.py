"""GH Archive-format sample data, generated: hourly `.json.gz` files of synthetic events.

No third-party data: the events are made here, in the real GH Archive event schema (the
fields data.gharchive reads, and enough of the rest to weigh what a real event weighs: actor,
repo, payload objects with their user and repository). `generate` writes hours of "stories"
(an issue, its comments, a PR that resolves it with a closing keyword, review comments, the
merge) among noise events (pushes, stars, forks, branch creations, which make up most of a
real hour), deterministically from a seed, and returns what a correct conversion must find.

    python -m data.gharchive_sample --out DIR [--hours 2] [--events-per-hour 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2024, 1, 1, tzinfo=UTC)
NOISE_TYPES = ("PushEvent", "WatchEvent", "CreateEvent", "ForkEvent", "DeleteEvent")


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _id(*parts: object) -> int:
    """A stable id (Python's hash() of a str changes with every process)."""
    return zlib.crc32(repr(parts).encode())


def _user(login: str) -> dict[str, Any]:
    return {"login": login, "id": _id(login), "type": "User", "site_admin": False}


def event(kind: str, repo: str, when: datetime, payload: dict[str, Any], actor: str = "someone") -> dict[str, Any]:
    """One GH Archive event: its envelope (id, type, actor, repo, created_at) around `payload`."""
    return {
        "id": str(_id(kind, repo, _iso(when), json.dumps(payload, sort_keys=True))),
        "type": kind,
        "actor": {"id": 1, "login": actor, "display_login": actor, "url": f"https://api.github.com/users/{actor}"},
        "repo": {"id": 1, "name": repo, "url": f"https://api.github.com/repos/{repo}"},
        "payload": payload,
        "public": True,
        "created_at": _iso(when),
    }


def issues_event(repo: str, number: int, when: datetime, title: str, body: str, action: str = "opened") -> dict:
    issue = {
        "number": number,
        "title": title,
        "body": body,
        "user": _user("reporter"),
        "state": "closed" if action == "closed" else "open",
        "created_at": _iso(when),
        "html_url": f"https://github.com/{repo}/issues/{number}",
    }
    return event("IssuesEvent", repo, when, {"action": action, "issue": issue}, "reporter")


def issue_comment_event(
    repo: str,
    number: int,
    when: datetime,
    comment_id: int,
    body: str,
    issue: tuple[str, str] = ("", ""),
    author: str = "helper",
    on_pull: bool = False,
    action: str = "created",
    created: datetime | None = None,
) -> dict:
    """A comment on issue (or, with on_pull, PR) `number`; the event carries the issue's text.
    `created`: when the comment was written, for an edit or deletion at `when` (default `when`)."""
    obj: dict[str, Any] = {"number": number, "title": issue[0], "body": issue[1], "user": _user("reporter")}
    if on_pull:
        obj["pull_request"] = {"html_url": f"https://github.com/{repo}/pull/{number}"}
    comment = {"id": comment_id, "body": body, "user": _user(author), "created_at": _iso(created or when)}
    return event("IssueCommentEvent", repo, when, {"action": action, "issue": obj, "comment": comment}, author)


def pull_request_event(
    repo: str, number: int, when: datetime, title: str, body: str, action: str = "opened", merged: bool = False
) -> dict:
    base_repo = {"full_name": repo, "name": repo.split("/")[1], "owner": _user(repo.split("/")[0])}
    pr = {
        "number": number,
        "title": title,
        "body": body,
        "user": _user("contributor"),
        "state": "closed" if action == "closed" else "open",
        "merged": merged,
        "merged_at": _iso(when) if merged else None,
        "html_url": f"https://github.com/{repo}/pull/{number}",
        "head": {"ref": f"fix-{number}", "sha": "0" * 40, "repo": base_repo},
        "base": {"ref": "main", "sha": "1" * 40, "repo": base_repo},
        "additions": 3,
        "deletions": 1,
        "changed_files": 1,
    }
    return event(
        "PullRequestEvent", repo, when, {"action": action, "number": number, "pull_request": pr}, "contributor"
    )


def review_comment_event(repo: str, number: int, when: datetime, body: str) -> dict:
    comment = {"id": number * 7, "body": body, "diff_hunk": "@@ -1 +1 @@\n-a\n+b", "path": "src/x.py"}
    payload = {"action": "created", "comment": comment, "pull_request": {"number": number, "title": "t"}}
    return event("PullRequestReviewCommentEvent", repo, when, payload, "reviewer")


def noise_event(rng: random.Random, repo: str, when: datetime) -> dict:
    kind = rng.choice(NOISE_TYPES)
    payload: dict[str, Any] = {"ref": "refs/heads/main", "size": 1, "commits": [{"sha": "2" * 40, "message": "wip"}]}
    return event(kind, repo, when, payload if kind == "PushEvent" else {"action": "started"}, "passer-by")


@dataclass(frozen=True)
class Expected:
    events: int
    merged_prs: int  # merged PRs in the dumps
    resolved_issues: int  # issues a merged PR resolves and whose text the dumps carry


def story(repo: str, issue: int, when: datetime, merged: bool) -> list[dict]:
    """Issue `issue` opened, discussed (two comments, one edited) and resolved by PR issue + 1."""
    minute = timedelta(minutes=1)
    text = (f"Crash in parser #{issue}", f"Steps to reproduce issue {issue}:\n\n    parse('x')\n")
    pr = issue + 1
    return [
        issues_event(repo, issue, when, *text),
        issue_comment_event(repo, issue, when + minute, issue * 10, "I can reproduce this.", text),
        issue_comment_event(repo, issue, when + 2 * minute, issue * 10 + 1, "Same herre.", text, author="other"),
        # The typo fixed a minute later: the edit event keeps the comment's creation time.
        issue_comment_event(
            repo,
            issue,
            when + 3 * minute,
            issue * 10 + 1,
            "Same here.",
            text,
            "other",
            action="edited",
            created=when + 2 * minute,
        ),
        pull_request_event(repo, pr, when + 4 * minute, f"Fix parser crash (#{issue})", f"Fixes #{issue}"),
        review_comment_event(repo, pr, when + 5 * minute, "nit: use a constant"),
        issue_comment_event(repo, pr, when + 6 * minute, pr * 10, "LGTM", on_pull=True),
        pull_request_event(
            repo, pr, when + 7 * minute, f"Fix parser crash (#{issue})", f"Fixes #{issue}", "closed", merged
        ),
    ]


def generate(
    out: str | Path, hours: int = 2, events_per_hour: int = 20_000, repos: int = 50, seed: int = 0
) -> Expected:
    """Write `hours` files `2024-01-01-H.json.gz` into `out`. About 1 event in 12 belongs to a
    story; 3 stories in 4 end in a merge; the rest are noise."""
    rng = random.Random(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = [f"org{i % 7}/project{i}" for i in range(repos)]
    total = merged_prs = 0
    for hour in range(hours):
        start = START + timedelta(hours=hour)
        events: list[dict] = []
        for s in range(events_per_hour // 100):
            merged = s % 4 != 3
            # Issue numbers are unique per repository: the hour and the story index.
            issue = 2 * (hour * events_per_hour + s) + 1
            events += story(rng.choice(names), issue, start + timedelta(seconds=rng.randrange(3000)), merged)
            merged_prs += merged
        while len(events) < events_per_hour:
            events.append(noise_event(rng, rng.choice(names), start + timedelta(seconds=rng.randrange(3600))))
        events.sort(key=lambda e: e["created_at"])  # stable: a story's same-second events keep their order
        text = "".join(json.dumps(e) + "\n" for e in events)
        # mtime=0: gzip's header would otherwise stamp the time, and the same seed must give the same bytes.
        (out / f"{start:%Y-%m-%d}-{hour}.json.gz").write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        total += len(events)
    return Expected(events=total, merged_prs=merged_prs, resolved_issues=merged_prs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory to write the hourly files into")
    ap.add_argument("--hours", type=int, default=2)
    ap.add_argument("--events-per-hour", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(generate(a.out, a.hours, a.events_per_hour, seed=a.seed))


if __name__ == "__main__":
    main()
