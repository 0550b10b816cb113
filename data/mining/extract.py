"""One pull request (or SWE-bench row) -> one training instance, or the reason it is dropped.

This is the per-item work that runs in-process or inside Ray tasks; it is a pure function of
(repository contents, item, MineJob), so both give the same results. Duplicates are decided by
the caller, which sees every kept instance in order (data/build.py).

Per PR: base commit (merge base, or the squash commit's parent) -> the PR's own commits
(authors for the bot rule, messages for linked issues) -> problem statement (the linked
issues' text from an issue dump, else the PR title and description) -> the diff base..head
split into test files (`test_patch`) and the rest (the oracle `patch`) -> file contents at
both ends (`code_context`, `oracle_new_content`) -> a check that the patch maps the first onto
the second -> relevant unchanged files within the context budget (the import rule here; with
`--context model` the caller adds them, asking a model for a batch of rows at once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from data.context.imports import relevant_candidates
from data.git.diffs import FileChange, changed_files, is_code_path, is_test_path
from data.git.pulls import PullRequest, linked_issues
from data.git.repo import GitError, Repo
from data.mining.filters import FilterConfig, context_limit, context_size, is_bot, over_limits
from data.mining.sources import InputError, IssueIndex
from data.patching import PatchError, apply_patch, parse_patch

MAX_PR_COMMITS = 250  # GitHub's own limit on the commits a PR lists


@dataclass(frozen=True)
class MineJob:
    repo_name: str  # "owner/name": instance ids and cross-repository issue links use it
    filters: FilterConfig
    relevant_files: int  # K: relevant unchanged files added to the context (0 = none)
    require_issue: bool  # FilterConfig.require_linked_issue, resolved against the inputs
    issues: IssueIndex | None  # issue dump of this repository, None without --issues
    # `--context model`: relevant files are left to the caller, which asks a model for a whole
    # batch of instances at once (data/mining/context_step.py); the Outcome says which rows need them.
    context_by_model: bool = False


@dataclass(frozen=True)
class Outcome:
    instance_id: str
    reason: str  # "kept" or a filters.REASONS entry
    instance: dict[str, Any] | None = None  # the row, for "kept"
    detail: str = ""  # why, for skips (e.g. the git error)
    needs_context: bool = False  # kept, and its relevant files are for the caller to choose


class _Drop(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def instance_id(repo_name: str, number: int) -> str:
    return f"{repo_name.replace('/', '__')}-{number}"


def _pr_commits(repo: Repo, pr: PullRequest, base: str) -> list[tuple[str, str]]:
    """(author "name <email>", message) of the PR's commits, oldest first."""
    if pr.kind == "squash":
        return [(pr.author, f"{pr.title}\n\n{pr.body}")]
    out = repo.text("log", f"--max-count={MAX_PR_COMMITS}", "--format=%an <%ae>%x1f%B%x1e", f"{base}..{pr.head}", "--")
    commits = [tuple(rec.strip("\n").split("\x1f", 1)) for rec in out.split("\x1e") if rec.strip()]
    return [(c[0], c[1]) for c in reversed(commits) if len(c) == 2]


def _problem(pr: PullRequest, commits: list[tuple[str, str]], job: MineJob) -> tuple[str, str, list[int]]:
    """(problem statement, problem_source, linked issue numbers); raises _Drop for bots and
    (when required) PRs without a linked issue. The PR author is the dump's PR author, else
    the author of the PR's first commit."""
    pr_text = job.issues.pulls.get(pr.number) if job.issues else None
    title = pr_text.title if pr_text else pr.title
    body = pr_text.body if pr_text else pr.body
    author = pr_text.author if pr_text and pr_text.author else (commits[0][0] if commits else pr.author)
    if job.filters.bots and is_bot(author, title, pr.source_branch):
        raise _Drop("bot")
    linked = linked_issues([title, body, *(m for _, m in commits)], job.repo_name, pr.number)
    found = [n for n in linked if job.issues and n in job.issues.issues]
    if job.require_issue and not (found if job.issues else linked):
        raise _Drop("no_linked_issue")
    if found:
        texts = [job.issues.issues[n] for n in found]  # type: ignore[union-attr]
        statement = "\n\n".join(f"{t.title}\n{t.body}".strip() for t in texts)
        return statement, "issue", linked
    return f"{title}\n{body}".strip(), "pr", linked


def _decode(data: bytes | None, what: str) -> str:
    if data is None:
        raise _Drop("git_error", f"{what}: object missing")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Drop("undecodable", what) from None


def _split_changes(changes: list[FileChange], cfg: FilterConfig) -> tuple[list[FileChange], list[FileChange]]:
    """(oracle changes, test changes), after the empty, tests-only and binary rules."""
    if not changes and cfg.empty:
        raise _Drop("empty")
    tests = [c for c in changes if c.is_test]
    code = [c for c in changes if not c.is_test]
    if tests and not code and cfg.tests_only:
        raise _Drop("tests_only")
    if any(c.is_binary for c in code):
        if cfg.binary:
            raise _Drop("binary")
        code = [c for c in code if not c.is_binary]
    return code, tests


def _file_texts(repo: Repo, c: FileChange) -> tuple[str, str, str]:
    """(diff section, content before, content after) of one change, all UTF-8 or _Drop."""
    for p in c.paths:
        try:
            p.encode("utf-8")
        except UnicodeEncodeError:
            raise _Drop("undecodable", repr(p)) from None
    name = c.new_path or c.old_path or "?"
    diff = _decode(c.diff, name)
    before = _decode(repo.blob(c.old_blob or ""), name) if c.old_path is not None else ""
    after = _decode(repo.blob(c.new_blob or ""), name) if c.new_path is not None else ""
    return diff, before, after


def _contents(repo: Repo, changes: list[FileChange], cfg: FilterConfig) -> tuple[str, dict[str, str], dict[str, str]]:
    """(oracle patch, code_context, oracle_new_content) of the changed files, in diff order.

    A file that is not UTF-8 drops the PR (cfg.undecodable) or is left out of all three.
    """
    patch: list[str] = []
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    for c in changes:
        try:
            diff, old, new = _file_texts(repo, c)
        except _Drop as d:
            if d.reason != "undecodable" or cfg.undecodable:
                raise
            continue
        patch.append(diff)
        if c.old_path is not None:
            before[c.old_path] = old
            if c.new_path != c.old_path and c.status != "C":
                after[c.old_path] = ""
        if c.new_path is not None:
            before.setdefault(c.new_path, "")
            after[c.new_path] = new
    return "".join(patch), before, after


def mine_pr(repo: Repo, pr: PullRequest, job: MineJob) -> Outcome:
    """Turn one merged PR into an instance; every failure becomes a counted reason."""
    iid = instance_id(job.repo_name, pr.number)
    try:
        return Outcome(iid, "kept", _mine_pr(repo, pr, job, iid), needs_context=_by_model(job))
    except _Drop as d:
        return Outcome(iid, d.reason, detail=d.detail)
    except GitError as e:
        return Outcome(iid, "git_error", detail=str(e))


def _by_model(job: MineJob) -> bool:
    return job.context_by_model and job.relevant_files > 0


def _mine_pr(repo: Repo, pr: PullRequest, job: MineJob, iid: str) -> dict[str, Any]:
    cfg = job.filters
    if iid in cfg.exclude_ids:
        raise _Drop("excluded")
    if job.repo_name.lower() in cfg.exclude_repo_names:
        raise _Drop("excluded_repo")
    base = pr.parent if pr.kind == "squash" else repo.merge_base(pr.parent, pr.head)
    if base is None:
        raise _Drop("git_error", f"{pr.parent[:12]} and {pr.head[:12]} share no history")
    commits = _pr_commits(repo, pr, base)
    statement, source, linked = _problem(pr, commits, job)
    code, tests = _split_changes(changed_files(repo, base, pr.head), cfg)
    # Test files are kept for evaluation harnesses only: undecodable bytes there are replaced.
    test_patch = "".join(c.diff.decode("utf-8", "replace") for c in tests)
    patch, context, new_content = _contents(repo, code, cfg)
    if cfg.no_code and not any(c.is_code for c in code if c.paths[-1] in new_content):
        raise _Drop("no_code")
    row = _finish(repo, base, statement, patch, context, new_content, job)
    row.update(
        instance_id=iid,
        repo=job.repo_name,
        test_patch=test_patch,
        problem_source=source,
        linked_issues=linked,
        pr_number=pr.number,
        created_at=pr.merged_at,
    )
    return row


def _check_limits(patch: str, cfg: FilterConfig) -> None:
    """Raise _Drop for the first size rule (files, hunks, changed lines) the patch breaks."""
    try:
        files = parse_patch(patch)
    except PatchError as e:
        raise _Drop("patch_mismatch", str(e)) from None
    hunks = sum(len(f.hunks) for f in files)
    lines = sum(1 for f in files for h in f.hunks for ln in h.lines if ln[0] in "+-")
    limit = over_limits(len(files), hunks, lines, cfg)
    if limit:
        raise _Drop(limit, f"{len(files)} files, {hunks} hunks, {lines} lines")


def _finish(
    repo: Repo | None,
    base: str,
    statement: str,
    patch: str,
    context: dict[str, str],
    new_content: dict[str, str],
    job: MineJob,
) -> dict[str, Any]:
    """Size rules, the apply check, the context budget and relevant files; the common tail."""
    cfg = job.filters
    _check_limits(patch, cfg)
    try:
        applied = apply_patch(context, patch)
    except PatchError as e:
        raise _Drop("patch_mismatch", str(e)) from None
    if applied != new_content:
        bad = sorted(p for p in set(applied) | set(new_content) if applied.get(p) != new_content.get(p))
        raise _Drop("patch_mismatch", f"applying the patch does not reproduce {bad[:3]}")
    budget = context_limit(cfg)
    used = context_size([statement, *context.values()], cfg)
    if budget and used > budget:
        raise _Drop("context_too_long", f"{used} > {budget}")
    context = dict(context)
    if repo is not None and job.relevant_files > 0 and not job.context_by_model:
        candidates = relevant_candidates(repo, base, list(context), set(context))
        context.update(add_relevant(repo, base, candidates, used, job.relevant_files, cfg))
    return dict(
        base_commit=base,
        problem_statement=statement,
        patch=patch,
        code_context=[{"path": p, "content": c} for p, c in context.items()],
        oracle_new_content=[{"path": p, "content": c} for p, c in new_content.items()],
    )


def add_relevant(
    repo: Repo, base: str, candidates: Iterable[str], used: int, k: int, cfg: FilterConfig
) -> dict[str, str]:
    """The first `k` of `candidates` (paths at `base`) that are UTF-8 and fit in the context
    budget, `used` of which the context already takes; {path: content}."""
    budget = context_limit(cfg)
    chosen: dict[str, str] = {}
    for path in candidates:
        if len(chosen) >= k:
            break
        blob = repo.blob(f"{base}:{path}")
        try:
            text = blob.decode("utf-8") if blob is not None else None
        except UnicodeDecodeError:
            continue
        if text is None:
            continue
        size = context_size([text], cfg)
        if budget and used + size > budget:
            continue
        chosen[path] = text
        used += size
    return chosen


def mine_swebench_row(repo: Repo | None, where: str, row: dict[str, Any], job: MineJob) -> Outcome:
    """One SWE-bench-format row -> an instance (file contents from the row itself or the clone)."""
    iid = row["instance_id"]
    # A row that carries its own files gets no relevant files (see _mine_row).
    needs = _by_model(job) and repo is not None and row.get("code_context") is None
    try:
        return Outcome(iid, "kept", _mine_row(repo, where, row, job), needs_context=needs)
    except _Drop as d:
        return Outcome(iid, d.reason, detail=d.detail)
    except GitError as e:
        return Outcome(iid, "git_error", detail=f"{where}: {e}")


def _row_files(value: Any, where: str, name: str) -> dict[str, str]:
    """A row's files as {path: content}, from either stored form (object, or [{path, content}])."""
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list) and all(
        isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("content"), str) for f in value
    ):
        return {f["path"]: f["content"] for f in value}
    raise InputError(f"{where}: field {name!r} must be a {{path: content}} object or a list of {{path, content}}")


def _mine_row(repo: Repo | None, where: str, row: dict[str, Any], job: MineJob) -> dict[str, Any]:
    cfg = job.filters
    if row["instance_id"] in cfg.exclude_ids:
        raise _Drop("excluded")
    if row["repo"].lower() in cfg.exclude_repo_names:
        raise _Drop("excluded_repo")
    if repo is not None and row["repo"].lower() != job.repo_name.lower():
        raise _Drop("other_repo", f"{where}: {row['repo']} is not {job.repo_name}")
    patch, base = row["patch"], row["base_commit"]
    try:
        fps = parse_patch(patch)
    except PatchError as e:
        raise _Drop("binary" if "binary" in str(e) else "patch_mismatch", f"{where}: {e}") from None
    paths = [p for fp in fps for p in (fp.old_path, fp.new_path) if p is not None]
    if not fps and cfg.empty:
        raise _Drop("empty")
    if paths and all(is_test_path(p) for p in paths) and cfg.tests_only:
        raise _Drop("tests_only")
    if cfg.no_code and not any(is_code_path(p) for p in paths):
        raise _Drop("no_code")
    _check_limits(patch, cfg)
    if row.get("code_context") is not None:
        context = _row_files(row["code_context"], where, "code_context")
        repo = None  # the row carries its own files: no clone needed, no relevant files added
    elif repo is None:
        raise InputError(f"{where}: the row has no code_context: pass --git with a clone of {row['repo']}")
    else:
        if repo.resolve(base) is None:
            raise _Drop("unknown_commit", f"{where}: base_commit {base} is not in {repo.path}")
        context = {
            fp.old_path: _decode(repo.blob(f"{base}:{fp.old_path}"), fp.old_path)
            for fp in fps
            if fp.old_path is not None
        }
        context.update({fp.new_path: "" for fp in fps if fp.new_path and fp.new_path not in context})
    try:
        new_content = apply_patch(context, patch)
    except PatchError as e:
        raise _Drop("patch_mismatch", f"{where}: {e}") from None
    if row.get("oracle_new_content") is not None:
        new_content = _row_files(row["oracle_new_content"], where, "oracle_new_content")
    out = _finish(repo, base, row["problem_statement"], patch, context, new_content, job)
    test_patch = row.get("test_patch") if isinstance(row.get("test_patch"), str) else None
    out.update(
        instance_id=row["instance_id"],
        repo=row["repo"],
        test_patch=test_patch,
        problem_source="swebench",
        linked_issues=None,
        pr_number=_number(row["instance_id"]),
        created_at=row.get("created_at") if isinstance(row.get("created_at"), str) else None,
    )
    return out


def _number(iid: str) -> int | None:
    tail = iid.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def mine_pr_chunk(prs: list[PullRequest], git_path: str, job: MineJob) -> list[Outcome]:
    """Mine a run of PRs with one repository handle (one cat-file process); a Ray task's body."""
    with Repo(git_path) as repo:
        return [mine_pr(repo, pr, job) for pr in prs]


def mine_row_chunk(rows: list[tuple[str, dict[str, Any]]], git_path: str, job: MineJob) -> list[Outcome]:
    """Mine a run of SWE-bench rows (`git_path` "" = rows carry their own files)."""
    if not git_path:
        return [mine_swebench_row(None, where, row, job) for where, row in rows]
    with Repo(git_path) as repo:
        return [mine_swebench_row(repo, where, row, job) for where, row in rows]
