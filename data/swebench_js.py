"""Multi-SWE-bench's JavaScript/TypeScript rows -> SWE-bench-format rows with a Node EnvSpec, and
their test labels -> this project's JS test ids.

Where the rows are: Multi-SWE-bench publishes its rows on a data hub this project cannot reach;
a public GitHub copy of its JS/TS files (`MSWE-agent/data/js/*.jsonl`, `ts/*.jsonl` of
kuppireddypravalika/MSWE-validation-dataset, commit f3788671b1be72292be1b3dfc61063f97dd474a0)
is fetched with the search tool's `fetch`. One JSON object a line:

    org, repo, number       the pull request (instance_id "<org>__<repo>-<number>")
    base                    {"label", "ref", "sha"}: sha is the base commit
    resolved_issues         [{"number", "title", "body"}]: the problem statement
    title, body             the pull request's own text (the statement when no issue is linked)
    fix_patch, test_patch   the gold patch and the test patch
    f2p_tests, s2p_tests,   {label: {"run", "test", "fix"}}: fail (or skipped, or absent) before
    n2p_tests                 the fix, pass after it -> FAIL_TO_PASS
    p2p_tests               pass before and after -> PASS_TO_PASS

Neither the Node version nor the test runner is in a row: both are the per-repository
harness's (multi-swe-bench/multi-swe-bench, multi_swe_bench/harness/repos/, commit
24f493f8a103e72312ded4f6b9c89f081d69cb09), read into REPOS below. A harness image that pins a
Node major (node:18, nodesource's setup_20.x) gives that version; one that installs Ubuntu's
`nodejs` package names none: "host".

Their labels are what each harness's log parser read from the runner's console, in one of four
forms, none of which is this project's `<file>::<describe > ... > test>` (JS-INTERFACE.md):

    "test/a.test.js"                    a whole file (jest's PASS/FAIL line): every test in it
    "test/a.test.js:adds one"           a file and a test's own title (jest --verbose's ✓ line),
                                        its describe blocks not named
    "app .use() should reject x"        mocha's full title: describe titles and the test's joined
                                        by spaces, no file (a title's own spaces make the split
                                        ambiguous)
    "should reject x"                   a test's own title, no file (mocha's spec reporter)

So a label maps to ids only against the ids a run reported (`resolve`): the gold patch's run
in this project's sandbox. A label that matches none (the test did not run, or its title
differs) or that is a bare title matching several tests is left unmapped and counted
(`map_labels`); a whole-file label maps to every test of the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from data.git.diffs import is_test_path
from reward.execution.environments import EnvSpec

JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


@dataclass(frozen=True)
class JsRepo:
    """What a repository's rows run under: the harness's runner and Node version."""

    runner: str  # a runners.RUNNERS name
    node: str  # "18", "20", or "host" (the harness installs Ubuntu's nodejs: no version named)
    network: str = "none"  # "loopback": the suite serves on 127.0.0.1 (supertest, a local http server)


# One row per repository of the published JS/TS rows whose runner this project has.
# (Kong/insomnia is left out: its harness runs `npm test` across workspaces whose runner
# changed over the rows' range.)
REPOS: dict[str, JsRepo] = {
    "expressjs/express": JsRepo(runner="mocha", node="host", network="loopback"),
    "axios/axios": JsRepo(runner="mocha", node="20", network="loopback"),
    "iamkun/dayjs": JsRepo(runner="jest", node="host"),
    "anuraghazra/github-readme-stats": JsRepo(runner="jest", node="host"),
    "darkreader/darkreader": JsRepo(runner="jest", node="18"),
}


class UnknownRepo(ValueError):
    pass


def is_multi_swe_bench(row: dict[str, Any]) -> bool:
    """A Multi-SWE-bench row (its own field names), as opposed to a SWE-bench one."""
    return "org" in row and "fix_patch" in row and isinstance(row.get("base"), dict)


def swebench_row(row: dict[str, Any]) -> dict[str, Any]:
    """A Multi-SWE-bench row in SWE-bench's field names; the labels kept as theirs."""
    repo = f"{row['org']}/{row['repo']}"
    issues = row.get("resolved_issues") or []
    statement = "\n\n".join(f"{i.get('title') or ''}\n{i.get('body') or ''}".strip() for i in issues)
    fail_to_pass = [*row.get("f2p_tests", {}), *row.get("s2p_tests", {}), *row.get("n2p_tests", {})]
    return {
        "instance_id": row.get("instance_id") or f"{row['org']}__{row['repo']}-{row['number']}",
        "repo": repo,
        "base_commit": row["base"]["sha"],
        "problem_statement": statement or f"{row.get('title') or ''}\n{row.get('body') or ''}".strip(),
        "patch": row["fix_patch"],
        "test_patch": row["test_patch"],
        "pr_number": row["number"],
        "FAIL_TO_PASS": fail_to_pass,
        "PASS_TO_PASS": list(row.get("p2p_tests", {})),
    }


def environment(repo: str, exclude_newer: str | None) -> EnvSpec:
    """The EnvSpec a row of `repo` runs in: its lock file's dependencies, the harness's runner
    and Node version; `exclude_newer` (the row's date) resolves a repository without a lock."""
    known = REPOS.get(repo)
    if known is None:
        raise UnknownRepo(f"repo {repo!r}: no runner known for it (data/swebench_js.py REPOS)")
    return EnvSpec(
        snapshot="git",
        node=known.node,
        install="lock",
        runner=known.runner,
        network=known.network,
        exclude_newer=exclude_newer,
    )


@dataclass(frozen=True)
class Label:
    """One of their labels, parsed: the test file when it names one, the title when it has one."""

    file: str | None
    title: str | None


def parse_label(label: str) -> Label:
    head, sep, tail = label.partition(":")
    if _is_test_file(head):
        return Label(head, tail if sep and tail else None)
    if _is_test_file(label):
        return Label(label, None)
    return Label(None, label)


def _is_test_file(text: str) -> bool:
    return " " not in text and text.endswith(JS_SUFFIXES) and is_test_path(text)


def _split(test_id: str) -> tuple[str, list[str]]:
    path, _, names = test_id.partition("::")
    return path, names.split(" > ")


def resolve(label: str, reported: Iterable[str]) -> list[str]:
    """The ids among `reported` (this project's, from a run) that `label` names: a file's every
    test; a file and title, the tests of that file with that own title (or full title); a bare
    title, the one test whose full title (mocha's, joined by spaces) or else own title it is."""
    parsed = parse_label(label)
    ids = sorted(set(reported))
    if parsed.file is not None:
        in_file = [i for i in ids if _split(i)[0] == parsed.file]
        if parsed.title is None:
            return in_file
        return [i for i in in_file if parsed.title in (_split(i)[1][-1], " ".join(_split(i)[1]))]
    full = [i for i in ids if " ".join(_split(i)[1]) == parsed.title]
    if full:
        return full
    own = [i for i in ids if _split(i)[1][-1] == parsed.title]
    return own if len(own) == 1 else []


@dataclass(frozen=True)
class Mapped:
    ids: list[str]  # this project's ids, sorted, each once
    unmapped: list[str]  # their labels that named no reported test, or a title several tests share


def map_labels(labels: Iterable[str], reported: Iterable[str]) -> Mapped:
    reported = list(reported)
    ids: set[str] = set()
    unmapped: list[str] = []
    for label in labels:
        found = resolve(label, reported)
        ids.update(found)
        if not found:
            unmapped.append(label)
    return Mapped(sorted(ids), unmapped)
