"""GH Archive dumps -> issue dump (`python -m data.gharchive`): the per-event facts and the
per-key aggregation without Ray, the round trip into `data.build --issues`, one small Ray Data
run that must give the in-process records, and errors that name the bad file."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from data import gharchive as gha
from data.build import BuildConfig, build
from data.fixtures.gharchive_sample import (
    START,
    event,
    generate,
    issue_comment_event,
    issues_event,
    pull_request_event,
    review_comment_event,
)
from data.fixtures.synthetic import generate_history
from data.mining.sources import InputError, read_issue_index

REPO = "octo/widget"
MIN = timedelta(minutes=1)


def _write(path: Path, events: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(e) + "\n" for e in events)
    return path


def _records(files: list[Path], discussion: bool = True, repos: frozenset[str] | None = None) -> dict[str, dict]:
    rows = gha.run_in_process([str(f) for f in files], repos, discussion, progress=lambda done: None)
    out = {}
    for row in rows:  # keyed "owner/name/issues/N", "owner/name/pull/N", or "stats"
        record = json.loads(row["record"])
        out[record["html_url"].removeprefix("https://github.com/") if "html_url" in record else "stats"] = record
    return out


def _thread(repo: str = REPO) -> list[dict]:
    """Issue 3 opened, two comments (the second written before the first in the file), PR 4
    resolving it merged; PR 5 closed unmerged; issue 6 never resolved."""
    text = ("Crash on empty input", "parse('') raises")
    return [
        issues_event(repo, 3, START, *text),
        issue_comment_event(repo, 3, START + 2 * MIN, 31, "Second comment.", text, author="bob"),
        issue_comment_event(repo, 3, START + MIN, 30, "First comment.", text, author="alice"),
        pull_request_event(repo, 4, START + 3 * MIN, "Handle empty input", "Fixes #3"),
        review_comment_event(repo, 4, START + 4 * MIN, "nit: rename"),
        pull_request_event(repo, 4, START + 5 * MIN, "Handle empty input", "Fixes #3", "closed", merged=True),
        pull_request_event(repo, 5, START + 5 * MIN, "Other fix", "closes #6", "closed", merged=False),
        issues_event(repo, 6, START, "Unresolved", "still open"),
        event("PushEvent", repo, START, {"ref": "refs/heads/main", "size": 0, "commits": []}),
    ]


def test_a_merged_pr_and_the_issue_it_resolves_with_its_comments_in_time_order(tmp_path: Path) -> None:
    records = _records([_write(tmp_path / "h.json.gz", _thread())])
    assert sorted(records) == ["octo/widget/issues/3", "octo/widget/pull/4", "stats"]  # 5 unmerged, 6 unresolved
    issue = records["octo/widget/issues/3"]
    assert issue["body"] == (
        "parse('') raises\n\n"
        "alice commented at 2024-01-01T00:01:00Z:\nFirst comment.\n\n"
        "bob commented at 2024-01-01T00:02:00Z:\nSecond comment."
    )
    assert (issue["title"], issue["comments"], issue["resolved_by"]) == ("Crash on empty input", 2, [4])
    pull = records["octo/widget/pull/4"]
    assert (pull["title"], pull["body"], pull["user"]["login"]) == ("Handle empty input", "Fixes #3", "contributor")
    assert pull["pull_request"]["merged_at"] == "2024-01-01T00:05:00Z"
    assert records["stats"] == {
        "IssueCommentEvent": 2,
        "IssuesEvent": 2,
        "PullRequestEvent": 3,
        "PullRequestReviewCommentEvent": 1,
        "PushEvent": 1,
    }
    without = _records([tmp_path / "h.json.gz"], discussion=False)
    assert without["octo/widget/issues/3"]["body"] == "parse('') raises"


def test_the_last_edit_of_a_comment_counts_a_deleted_one_goes_and_pr_comments_are_not_kept(tmp_path: Path) -> None:
    text = ("T", "B")
    events = [
        issue_comment_event(REPO, 3, START, 1, "tyop", text),
        issue_comment_event(REPO, 3, START + MIN, 2, "spam", text),
        issue_comment_event(REPO, 3, START + 2 * MIN, 1, "typo", text, action="edited", created=START),
        issue_comment_event(REPO, 3, START + 3 * MIN, 2, "spam", text, action="deleted", created=START + MIN),
        issue_comment_event(REPO, 4, START, 40, "the patch looks right", on_pull=True),
        pull_request_event(REPO, 4, START + 4 * MIN, "Fix", "fixes #3", "closed", merged=True),
    ]
    records = _records([_write(tmp_path / "h.json.gz", events)])
    # No IssuesEvent: the comment events carry the issue's text (one opened before the dumps).
    issue = records["octo/widget/issues/3"]
    assert issue["body"] == "B\n\nhelper commented at 2024-01-01T00:00:00Z:\ntypo" and issue["comments"] == 1
    assert "looks right" not in records["octo/widget/pull/4"]["body"]


def test_links_of_other_repositories_and_filtered_repositories_give_nothing(tmp_path: Path) -> None:
    events = [
        issues_event(REPO, 3, START, "Here", ""),
        issues_event("other/lib", 3, START, "There", ""),
        pull_request_event(REPO, 4, START + MIN, "x", "fixes other/lib#3", "closed", merged=True),
        *_thread("keep/me"),
    ]
    path = _write(tmp_path / "h.json.gz", events)
    # octo/widget's PR closes other/lib#3, not its own #3: neither issue is written.
    assert sorted(_records([path])) == ["keep/me/issues/3", "keep/me/pull/4", "octo/widget/pull/4", "stats"]
    assert sorted(_records([path], repos=frozenset({"octo/widget"}))) == ["octo/widget/pull/4", "stats"]


def test_the_dump_round_trips_into_data_build(tmp_path: Path) -> None:
    """PRs 1-4 of a synthetic history ("fixes #100N" in their messages), their GH Archive
    events, and data.build reading the converted dump: the statements are the issues' texts."""
    history = tmp_path / "git"
    generate_history(history, num_prs=4)
    repo = "example/synthetic"
    events = []
    for n in (1, 2, 3):  # no events for PR 4 and its issue: it has no issue text, so it is dropped
        text = (f"Issue {1000 + n}", f"f breaks for n={n}")
        events += [
            issues_event(repo, 1000 + n, START, *text),
            issue_comment_event(repo, 1000 + n, START + MIN, n, f"confirmed {n}", text),
            pull_request_event(repo, n, START + 2 * MIN, f"Fix f ({n})", f"Fixes #{1000 + n}", "closed", True),
        ]
    dump = tmp_path / "issues.jsonl.gz"
    counts = gha.convert(gha.ArchiveConfig(inputs=(str(_write(tmp_path / "in.json.gz", events)),), out=str(dump)))
    assert (counts["pull"], counts["issue"], counts["events:IssuesEvent"]) == (3, 3, 3)
    assert sorted(read_issue_index([str(dump)], repo).issues) == [1001, 1002, 1003]
    manifest = build(BuildConfig(git=(str(history),), issues=(str(dump),), out=str(tmp_path / "out")))
    assert manifest["counts"]["kept"] == 3 and manifest["counts"]["no_linked_issue"] == 1
    rows = sorted(pads.dataset(tmp_path / "out").to_table().to_pylist(), key=lambda r: r["pr_number"])
    assert [r["problem_statement"] for r in rows] == [
        f"Issue {1000 + n}\nf breaks for n={n}\n\nhelper commented at 2024-01-01T00:01:00Z:\nconfirmed {n}"
        for n in (1, 2, 3)
    ]
    assert {r["problem_source"] for r in rows} == {"issue"}


def test_bad_input_stops_with_one_line_naming_the_file_and_leaves_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "a.json.gz", _thread())
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b'{"type": "PushEvent"}\n{"type": oops\n'))
    out = tmp_path / "dump.jsonl"
    with pytest.raises(SystemExit) as exit_:
        gha.main(["--input", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and not out.exists() and list(tmp_path.glob(".dump*")) == []
    assert (
        err.startswith("python -m data.gharchive: error: ") and f"{tmp_path}/b.json.gz: line 2: malformed JSON" in err
    )
    (tmp_path / "b.json.gz").write_bytes(b"not gzip")
    with pytest.raises(InputError, match=r"b\.json\.gz: unreadable after line 0 \(BadGzipFile"):
        gha.convert(gha.ArchiveConfig(inputs=(str(tmp_path),), out=str(out)))
    bad_event = pull_request_event(REPO, 4, START, "t", "b")
    del bad_event["payload"]["pull_request"]["number"]
    _write(tmp_path / "b.json.gz", [bad_event])
    with pytest.raises(InputError, match=r"b\.json\.gz: line 1: payload\.pull_request: missing field 'number'"):
        gha.convert(gha.ArchiveConfig(inputs=(str(good), str(tmp_path / "b.json.gz")), out=str(out)))
    repos = tmp_path / "repos.txt"
    repos.write_text("octo/widget\nnot a repository\n")
    with pytest.raises(InputError, match=r"repos\.txt: line 2: expected a repository as owner/name.*\(--repos\)"):
        gha.convert(gha.ArchiveConfig(inputs=(str(good),), out=str(out), repos=str(repos)))
    with pytest.raises(InputError, match=r"nothing/\*\.json\.gz: no such file"):
        gha.convert(gha.ArchiveConfig(inputs=(str(tmp_path / "nothing/*.json.gz"),), out=str(out)))
    assert not out.exists()


def test_the_sample_generator_is_deterministic_and_its_expected_counts_are_found(tmp_path: Path) -> None:
    expected = generate(tmp_path / "a", hours=2, events_per_hour=1000, seed=3)
    generate(tmp_path / "b", hours=2, events_per_hour=1000, seed=3)
    files = sorted((tmp_path / "a").iterdir())
    assert [f.name for f in files] == ["2024-01-01-0.json.gz", "2024-01-01-1.json.gz"]
    assert [f.read_bytes() for f in files] == [f.read_bytes() for f in sorted((tmp_path / "b").iterdir())]
    records = _records(files)
    assert sum(records["stats"].values()) == expected.events == 2000
    pulls = [k for k in records if "/pull/" in k]
    issues = [k for k in records if "/issues/" in k]
    # 10 stories an hour, stories 3 and 7 of each hour left unmerged.
    assert len(pulls) == expected.merged_prs == 16 and len(issues) == expected.resolved_issues == 16


def test_ray_data_gives_the_in_process_records_and_names_a_bad_file(tmp_path: Path) -> None:
    """One local Ray of 2 CPUs (127.0.0.1), one run: the streaming pipeline (flat_map, hash
    shuffle, map_groups) gives the in-process records, and a bad file comes back as an error row
    naming it, which write_dump turns into the command's error, leaving no output."""
    from actors.cluster.join import ray_session

    generate(tmp_path / "in", hours=2, events_per_hour=500)
    files = [str(f) for f in sorted((tmp_path / "in").iterdir())]
    here = [r for r in gha.run_in_process(files, None, True, progress=lambda done: None) if r["kind"] != "stats"]
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'{"type": "PushEvent"}\n{]\n'))
    with ray_session("", 2) as cpus:
        rows = list(gha.run_on_ray([*files, str(bad)], None, True, partitions=2 * cpus))
    errors = [r["record"] for r in rows if r["kind"] == "error"]
    assert errors == [f"{bad}: line 2: malformed JSON line (Expecting property name enclosed in double quotes)"]
    on_ray = sorted(r["record"] for r in rows if r["kind"] in ("pull", "issue"))
    assert on_ray == sorted(r["record"] for r in here) and len(on_ray) == 2 * 8  # 8 merged PRs, 8 issues
    stats = [json.loads(r["record"]) for r in rows if r["kind"] == "stats"]
    assert sum(stats[0].values()) == 1000  # the generated events; the bad file counts none
    with pytest.raises(InputError, match="bad.json.gz: line 2"):
        gha.write_dump(rows, str(tmp_path / "dump.jsonl"))
    assert list(tmp_path.glob("*dump*")) == []
