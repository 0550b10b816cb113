"""`python -m data.swebench_exec`: SWE-bench rows -> schema-v3 instances that run their tests here.

    python -m data.swebench_exec --rows FILE [--rows FILE ...] --git owner/name=CLONE ... --out DIR
        [--test-patches MINED_DIR ...] [--overwrite]
    python -m data.swebench_exec --compare OFFICIAL_DIR VALIDATED_DIR

Each row keeps SWE-bench's own labels (FAIL_TO_PASS, PASS_TO_PASS) and gets the environment
SWE-bench's harness builds for its repository and version, as an EnvSpec
(reward/execution/environments.py), so that `python -m data.validate` can label the same rows
again and the two label sets can be compared (`--compare`). SWE-bench's per-repository specs
are data beside the harness's table of repositories (reward/execution/repos.py, its
swebench_specs.json: python, conda `packages`, `pip_packages`, `install`, `pre_install` per
version, read from SWE-bench 4.1.0's constants); what the harness adds or leaves out for a
repository is that repository's row in repos.py. A spec becomes:

    python         the spec's version (an interpreter this machine lacks is counted
                   `python_missing_here`: validation then counts the instance no_interpreter)
    requirements   `packages` ("requirements.txt": the repository's requirements files at the
                   row's environment_setup_commit, `-r` followed, its own project left out;
                   else conda package names, which PyPI shares) and `pip_packages`, pins kept;
                   a package yanked since is swapped as the harness does (`replace_requirements`);
                   a conda `environment.yml` (xarray, matplotlib) is not read: its spec's
                   pip_packages are installed (the main libraries, pinned), its other conda
                   packages (optional backends, whose tests then skip) are not, noted
                   `conda_env_pip_only`
    install        "snapshot" for `pip install [-e] .[extras]` (pip's options before the project
                   allowed) and `setup.py develop|install`; with `--no-build-isolation`
                   (scikit-learn) the project's own build-requires are not installed
                   (build_requires false): the spec's packages build it
    network        "loopback": the harness runs tests in containers with a network; here they
                   get the sandbox's own loopback (local servers work, the internet does not)
    exclude_newer  the later of the row's created_at and its environment_setup_commit's date
                   (the harness reads the requirements there), raised to the interpreter's
                   first release; the spec's exact pins are exempt (environments.py)
    runner         the row's runner and its options at the version (Repository.command_at):
                   django's `tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel
                   1`, SWE-bench's command (runner "django": the harness runs that script under
                   its unittest recorder, bootstrap.py); every other suite under pytest, its
                   recorder and canaries. Where SWE-bench uses another runner and the suite also
                   runs under pytest, the row's `requirements` add pytest (as of the same date):
                   sympy (SWE-bench: `bin/test -C --verbose`; sympy's conftest.py makes its
                   XFAIL/SKIP decorators pytest's). The row's `runner_only` leaves out what only
                   runs SWE-bench's command (sphinx: tox and tox-current-env; noted
                   `runner_only_requirements_dropped`)
    pre_install    django's (1.7 to 3.2) only generates the en_US.UTF-8 locale: not run, the
                   sandbox's LANG is C.UTF-8 (noted `locale_as_c_utf8`); any other apt step
                   drops the row as needs_apt, naming the packages; a step the harness does
                   not read (pre_install_requirements) that changes nothing at the row's base
                   commit (a sed whose pattern is in no line of its file: pytest 6.3's
                   `s/>=>=/>=/` on setup.cfg, a typo only some commits of that line carry) is
                   dropped, noted `pre_install_noop` (noop_steps reads the file as text; the
                   spec's shell never runs on the host)
    undated        the row's `test_data`: pydicom's tests download their data files at run
                   time, offline they need the pydicom-data package
    services       the row's stand-ins (reward/execution/services.py): requests' old
                   suites call http://httpbin.org, which the sandbox then serves from the
                   httpbin package on its own loopback (https:// URLs still fail: no TLS)

Dropped, counted per reason: duplicate (a row whose instance_id came before: the first is
kept), no_clone, no_spec (repository or version not in the specs), needs_apt (a `pre_install`
step installs system packages: named), pre_install (a shell step that is neither a sed on
tox.ini nor one tightening a requirement: pre_install_requirements), install_unsupported,
no_test_patch (none in the row, none matched), and the mining reasons (data/mining/extract.py:
unknown_commit, patch_mismatch, ...). The version, when the row has none: the repository's
version file at the commit (infer_version), else its newest release tag (release_tag; astropy's
main branch carries "v5.1.dev" tags), named as the specs name it (astropy's "v5.3"), or, for a
line the specs do not list, the newest listed below it (noted `version_nearest_spec`).

Rows without a test patch (SWE-bench Lite's, `requests_lite.jsonl`) get one from a mined PR of
the same base commit whose patch is the row's (`--test-patches`: data.build output of that
repository), else from the clone's `refs/pull/N/head` (N from the instance id) when its diff
from the base commit, outside the test files, is exactly the row's patch on the patch's files.
A PR also touches files the gold patch leaves out (a changelog, AUTHORS, the docs): those, when
they are not code (`_is_code`), are ignored and noted (`non_code_files_ignored`); another code
file means another change, not this one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conf.errors import UserError, fail
from data import swebench_js
from data.git.diffs import is_test_path
from data.git.repo import GitError, Repo, parse_clone
from data.loader import read_instances
from data.mining.extract import MineJob, mine_swebench_row
from data.mining.filters import FilterConfig
from data.mining.sources import iter_records, iter_swebench_rows
from data.patching import PatchError, parse_patch
from data.schema import Instance
from data.shards import ShardWriter, prepare_output, write_manifest
from reward.execution import declared, repos
from reward.execution.environments import EnvSpec, InterpreterUnavailable, find_python
from reward.execution.environments import _canonical as canonical
from reward.execution.environments import _utc as utc
from reward.execution.pythons import RELEASES

EXAMPLES = 5
# Rows are benchmark instances: none of the mining filters (sizes, bots, context) applies.
_NO_FILTERS = FilterConfig(
    bots=False,
    tests_only=False,
    no_code=False,
    max_files=0,
    max_hunks=0,
    max_changed_lines=0,
    max_context_chars=0,
    dedupe=False,
)


class Drop(Exception):
    """A row that cannot become an instance here; `reason` is counted."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason, self.detail = reason, detail


# How a version file (repos.version_files) states it: `__version__ = "2.0.1.dev0"`, `VERSION =
# (3, 0, 0, "alpha", 0)` (django), `version = "..."` (setup.cfg).
_VERSION_RE = re.compile(
    r"""(?m)^\s*(?:__version__|version)\s*[=:]\s*['"]?(\d+)\.(\d+)|^VERSION\s*=\s*\(\s*(\d+)\s*,\s*(\d+)"""
)


def infer_version(read: declared.Reader, repo: str) -> str | None:
    """ "MAJOR.MINOR" as the repository states it at the row's commit, for rows that carry no
    version (SWE-bench Lite's exports): what SWE-bench's own version field is, the release
    line the commit is on. None when no file says."""
    for rel in repos.version_files(repo):
        text = read(rel)
        if text and (m := _VERSION_RE.search(text)):
            major, minor = (g for g in m.groups() if g is not None)
            return f"{major}.{minor}"
    return None


def release_tag(repo: Repo, commit: str) -> str | None:
    """The newest release the commit descends from (`git describe --tags`, "4.5.0"), for
    repositories whose version only a build writes (setuptools_scm: pytest, xarray): its major
    and minor are what SWE-bench's version lookup reads from the built package (setuptools_scm's
    next-dev version keeps the last tag's), and the build is given it as its version
    (EnvSpec.version; a git archive has no history to read it from)."""
    described = repo.run("describe", "--tags", "--abbrev=0", commit, check=False).decode().strip()
    # "7.0.0.dev0"; astropy tags its main branch "v5.1.dev" when 5.1 starts there
    m = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc)\d+|\.dev\d*|\.post\d+)?)", described)
    return m.group(1) if m else None


def _numeric(version: str) -> tuple[int, ...] | None:
    return tuple(int(p) for p in version.lstrip("v").split(".")) if re.fullmatch(r"v?\d+(\.\d+)*", version) else None


def spec_version(version: str, known: set[str]) -> tuple[str, bool] | None:
    """The specs' name for a release line read from the tags, and whether it is the line itself:
    "5.3" is astropy's spec "v5.3" (SWE-bench's version there kept the tag's v); a line the specs
    do not list takes the newest listed one below it (astropy's "6.0.dev" rows get 5.3's spec:
    SWE-bench versioned astropy's rows by released versions, which lag the dev tag). None when
    no listed version is below it."""
    for name in (version, f"v{version}"):
        if name in known:
            return name, False
    target = _numeric(version)
    below = [(n, v) for v in known if (n := _numeric(v)) and target and n < target]
    return (max(below)[1], True) if below else None


def spec_for(specs: dict[str, Any], repo: str, version: str | None) -> dict[str, Any]:
    """The harness spec of `repo` at `version`; a row without a version takes the repository's
    spec when all its versions share one (psf/requests)."""
    entry = specs.get(repo)
    if entry is None:
        raise Drop("no_spec", f"{repo}: not in {repos.SWEBENCH_SPECS.name}")
    groups = entry["specs"]
    if version is None:
        if len(groups) == 1:
            return dict(groups[0])
        raise Drop("no_spec", f"{repo}: the row has no version and the versions' specs differ")
    for group in groups:
        if version in group["versions"]:
            return dict(group)
    raise Drop("no_spec", f"{repo}: version {version} not in {repos.SWEBENCH_SPECS.name}")


def environment(
    spec: dict[str, Any],
    requirement_paths: list[str],
    read: declared.Reader,
    created_at: str | None,
    src_layout: bool = False,
) -> EnvSpec:
    """The EnvSpec of a harness spec. `read` reads the repository at its environment commit."""
    steps = [] if locale_only(spec) else spec.get("pre_install") or []
    if any("apt-get" in step or "apt " in step for step in steps):
        raise Drop("needs_apt", f"pre_install installs system packages: {' && '.join(steps)[:160]}")
    pinned = pre_install_requirements(steps)  # after the others: SWE-bench's install runs after its pip_packages
    reqs: list[str] = []
    packages = (spec.get("packages") or "").strip()
    if packages == "requirements.txt":
        for rel in requirement_paths or ["requirements.txt"]:
            more, _ = declared.requirement_lines(read, rel)
            reqs += more
    elif packages == "environment.yml":
        pass  # a conda environment: its pip_packages only (noted by the caller, conda_env_pip_only)
    elif packages:
        # Shell words (scikit-learn's specs quote them: 'numpy==1.19.2'); conda's "x=1" is "x==1".
        reqs += [re.sub(r"(?<![=<>!~])=(?!=)", "==", name) for name in shlex.split(packages)]
    reqs += list(spec.get("pip_packages") or [])
    reqs += pinned
    swaps = repos.replacements()
    reqs = [swaps.get(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip(), r) for r in reqs]
    install = spec.get("install") or ""
    # pip's options before the project (scikit-learn: `-v --no-use-pep517 --no-build-isolation
    # -e .`) change how pip builds it, not what: the build here is always without isolation.
    options = r"(?:\s+-(?!e\s)[\w-]+(?:=\S+)?)*"
    if m := re.search(rf"pip install{options}\s+(?:-e\s+)?['\"]?\.(?:\[([\w,.-]+)\])?['\"]?(?:\s|$)", install):
        extras = tuple(e for e in (m.group(1) or "").split(",") if e)
    elif re.search(r"setup\.py\s+(develop|install)", install):
        extras = ()
    else:
        raise Drop("install_unsupported", f"install: {install[:120]}")
    python = str(spec["python"])
    date = created_at
    if date and python in RELEASES and date < RELEASES[python]:
        date = f"{RELEASES[python]}T00:00:00Z"  # nothing resolved as of an earlier date installs on it
    return EnvSpec(
        snapshot="git",
        python=python,
        requirements=tuple(dict.fromkeys(r for r in reqs if r.strip())),
        install="snapshot",
        extras=extras,
        exclude_newer=date,
        pythonpath=("src",) if src_layout else (".",),
        network="loopback",  # the harness's containers have a network: the sandbox gives its own loopback
        build_requires="--no-build-isolation" not in install,
    )


_LOCALE_STEPS = re.compile(
    r"apt-get update && apt-get install -y locales|echo 'en_US UTF-8' > /etc/locale.gen|locale-gen en_US.UTF-8"
)


_SED = re.compile(r"""(?:grep -q '[^']*' (\S+) && )?sed -i (['"])s/(.*?)(?<!\\)/(.*?)(?<!\\)/\2 (\S+)""")
_PINNED = re.compile(r"[A-Za-z][\w.-]*\s*(?:[<>=!~]=?\s*[\w.*]+\s*,?\s*)+")
_SED_TARGETS = ("setup.py", "setup.cfg", "pyproject.toml")  # a pin tightened there is a requirement


def pre_install_requirements(steps: list[str]) -> list[str]:
    """The requirements that a spec's pre_install steps amount to; Drop("pre_install") for a
    step that is not one of these kinds:

        sed on tox.ini            nothing: SWE-bench runs its tests through tox, the harness
                                  runs pytest itself (sphinx's `s/pytest/pytest -rA/`)
        sed on setup.py, setup.cfg, pyproject.toml that tightens a requirement
                                  (sphinx's `s/Jinja2>=2.3/Jinja2<3.0/`, astropy's
                                  `requires = ["setuptools==68.0.0",`): the new requirement,
                                  installed beside the file's own (the resolution takes both)
    """
    out: list[str] = []
    for step in steps:
        m = _SED.fullmatch(step.strip())
        if m is None or (m.group(1) and m.group(1) != m.group(5)):
            raise Drop("pre_install", f"shell steps before the install are not supported: {step[:120]}")
        old, new, target = m.group(3).replace("\\", ""), m.group(4).replace("\\", ""), m.group(5)
        if target == "tox.ini":
            continue
        added = [r.strip().rstrip(",").strip() for r in _PINNED.findall(new) if r.strip() not in old]
        if target not in _SED_TARGETS or not added:
            raise Drop("pre_install", f"shell steps before the install are not supported: {step[:120]}")
        out += added
    return out


def _sed_regex(pattern: str) -> re.Pattern[str] | None:
    """A sed basic regular expression as Python's (None when it is not one this reads): in a
    BRE `+ ? ( ) { } |` are literal and `\\(` groups; `. * [ ] ^ $` mean what they mean here."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(nxt if nxt in "(){}|+?" else re.escape(nxt))
            i += 2
            continue
        out.append(re.escape(c) if c in "+?(){}|" else c)
        i += 1
    try:
        return re.compile("".join(out))
    except re.error:
        return None


def noop_steps(steps: list[str], read: declared.Reader) -> list[str]:
    """The pre_install steps that change nothing in the tree `read` reads (the row's base commit,
    where SWE-bench's harness runs them before the install): a `sed -i 's/OLD/NEW/' FILE` whose
    OLD matches no line of FILE (or FILE is absent), `grep -q X FILE && sed ...` whose X is not
    in FILE. Such a step is dropped, not run: what it would repair is not there (pytest 6.3's
    `s/>=>=/>=/` on setup.cfg, a typo of some commits of that line and not of others). Read as
    text here; nothing of the spec's shell runs on the host."""
    out = []
    for step in steps:
        m = _SED.fullmatch(step.strip())
        if m is None or (m.group(1) and m.group(1) != m.group(5)):
            continue
        text = read(m.group(5))
        guard = re.match(r"grep -q '([^']*)' ", step.strip())
        regex = _sed_regex(m.group(3))
        absent = text is None or bool(guard and guard.group(1) not in text)
        if absent or (regex is not None and not any(regex.search(line) for line in (text or "").splitlines())):
            out.append(step)
    return out


def locale_only(spec: dict[str, Any]) -> bool:
    """Whether a spec's pre_install steps only generate the en_US.UTF-8 locale (django 1.7 to
    3.2): the sandbox runs with LANG=C.UTF-8, UTF-8 as that locale is (what the old interpreters
    need it for: a filesystem and stdout encoding that is not ASCII), without its formatting."""
    steps = spec.get("pre_install") or []
    return bool(steps) and all(_LOCALE_STEPS.fullmatch(step.strip()) for step in steps)


def _git_reader(repo: Repo, commit: str) -> declared.Reader:
    def read(rel: str) -> str | None:
        blob = repo.blob(f"{commit}:{rel}")
        return None if blob is None else blob.decode("utf-8", errors="replace")

    return read


def _src_layout(repo: Repo, commit: str) -> bool:
    out = repo.run("ls-tree", "--name-only", f"{commit}:src", check=False).decode().split()
    return any(repo.blob(f"{commit}:src/{name}/__init__.py") is not None for name in out)


def normalized(patch: str) -> str:
    """A diff without what differs between equal diffs: index lines, hunk headers' function names."""
    lines = []
    for line in patch.strip().splitlines():
        if line.startswith("index "):
            continue
        lines.append(re.sub(r"^(@@ [^@]* @@).*", r"\1", line))
    return "\n".join(lines)


def mined_test_patches(paths: list[str]) -> dict[str, list[tuple[str, str]]]:
    """base commit -> (patch, test patch) of each mined instance (data.build output) on it."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in paths:
        for inst in read_instances(path, 0):
            if inst.test_patch:
                out[inst.base_commit].append((inst.patch, inst.test_patch))
    return out


# Files a PR changes beside its fix that no test reads: release notes, credits, prose.
_NOT_CODE_SUFFIXES = (".rst", ".md", ".txt", ".adoc")
_NOT_CODE_NAMES = re.compile(r"(?i)^(authors|contributors|changes|changelog|history|news)(\.\w+)?$")
_NOT_CODE_DIRS = ("doc/", "docs/", "changelog.d/", "changes/", "newsfragments/")


def _is_code(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return not (path.endswith(_NOT_CODE_SUFFIXES) or _NOT_CODE_NAMES.match(name) or path.startswith(_NOT_CODE_DIRS))


def _sections(diff: str) -> list[str]:
    """A git diff cut into its files' sections, each from its `diff --git` line."""
    return [s for s in re.split(r"(?m)^(?=diff --git )", diff) if s.startswith("diff --git ")]


def _section_path(section: str) -> str | None:
    m = re.match(r"diff --git a/(\S+) b/(\S+)", section)
    return m.group(2) if m else None


def matches_gold(diff: str, gold: str) -> list[str] | None:
    """Whether `diff` (a PR's changes outside its tests) is the gold patch on the gold patch's
    files, its other files not code: those paths (to be said), or None when it is not."""
    sections = _sections(diff)
    gold_paths = {_section_path(s) for s in _sections(gold)}
    on_gold = [s for s in sections if _section_path(s) in gold_paths]
    others = [p for s in sections if (p := _section_path(s)) not in gold_paths]
    if any(p is None or _is_code(p) for p in others) or normalized("".join(on_gold)) != normalized(gold):
        return None
    return [p for p in others if p is not None]


def pr_ref_test_patch(repo: Repo, row: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The test files' diff of the clone's refs/pull/N/head, when its other files' diff is the
    row's patch (matches_gold: so the ref is this PR on this base), and the non-code files it
    ignored. The diff is taken from the row's base commit, else from where the PR's branch left
    it (`base...head`: a branch started before, or merged with, later history carries other
    changes against the base; sympy's often do)."""
    number = row["instance_id"].rpartition("-")[2]
    head = repo.resolve(f"refs/pull/{number}/head") if number.isdigit() else None
    if head is None:
        return None
    base = row["base_commit"]
    for between in ((base, head), (f"{base}...{head}",)):
        diff = repo.run("diff", "--no-color", "--no-ext-diff", *between, check=False).decode("utf-8", errors="replace")
        try:
            files = parse_patch(diff)
        except PatchError:
            continue
        tests = [s for s in _sections(diff) if _is_test_section(s)]
        code = [s for s in _sections(diff) if not _is_test_section(s)]
        if files and tests and (ignored := matches_gold("".join(code), row["patch"])) is not None:
            return "".join(tests), ignored
    return None


def mined_test_patch(mined: dict[str, list[tuple[str, str]]], row: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The test patch of a mined PR on the row's base commit whose patch is the row's (see
    matches_gold), and the non-code files it ignored."""
    for patch, test_patch in mined.get(row["base_commit"], []):
        if (ignored := matches_gold(patch, row["patch"])) is not None:
            return test_patch, ignored
    return None


def _is_test_section(section: str) -> bool:
    path = _section_path(section)
    return path is not None and is_test_path(path)


@dataclass
class Converter:
    clones: dict[str, Path]
    specs: dict[str, Any]
    mined: dict[str, list[tuple[str, str]]]

    def convert(self, where: str, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """One row -> (instance row, notes); Drop with the reason."""
        clone = self.clones.get(row["repo"])
        if clone is None:
            raise Drop("no_clone", f"{row['repo']}: pass --git {row['repo']}=CLONE")
        if row["repo"] in swebench_js.REPOS:
            return self.convert_js(where, row, clone)
        notes: list[str] = []
        with Repo(str(clone)) as repo:
            version = row.get("version")
            known = {v for group in self.specs.get(row["repo"], {}).get("specs", []) for v in group["versions"]}
            if version is None and (inferred := infer_version(_git_reader(repo, row["base_commit"]), row["repo"])):
                version = inferred if inferred in known else None  # else the repository's one spec, if one
                notes += ["version_from_clone"] if version else []
            release = release_tag(repo, row["base_commit"]) if version is None else None
            if version is None and release and (tagged := spec_version(".".join(release.split(".")[:2]), known)):
                version = tagged[0]
                notes += ["version_from_tags", *(["version_nearest_spec"] if tagged[1] else [])]
            spec = spec_for(self.specs, row["repo"], version)
            created = (
                row.get("created_at")
                or repo.run("log", "-1", "--format=%cI", row["base_commit"], check=False).decode().strip()
            )
            created = _utc(created)
            commit = row.get("environment_setup_commit") or row["base_commit"]
            # The harness builds the environment of the version from its environment commit
            # (later than the row's): its requirements are resolved as of that commit's date.
            setup_date = _utc(repo.run("log", "-1", "--format=%cI", commit, check=False).decode().strip() or None)
            test_patch = row.get("test_patch")
            if not test_patch and (found := mined_test_patch(self.mined, row)):
                test_patch = found[0]
                notes += ["test_patch_from_mined_pr", *(["non_code_files_ignored"] if found[1] else [])]
            if not test_patch and (found := pr_ref_test_patch(repo, row)):
                test_patch = found[0]
                notes += ["test_patch_from_pr_ref", *(["non_code_files_ignored"] if found[1] else [])]
            if not test_patch:
                raise Drop("no_test_patch", f"{where}: no test patch in the row, none matched")
            spec, noops = _without_noops(spec, _git_reader(repo, row["base_commit"]))
            notes += ["pre_install_noop"] if noops else []
            paths = self.specs[row["repo"]].get("requirements_paths", [])
            resolved_as_of = max(d for d in (created, setup_date) if d) if created or setup_date else None
            env = environment(
                spec, paths, _git_reader(repo, commit), resolved_as_of, _src_layout(repo, row["base_commit"])
            )
            known_repo = repos.lookup(row["repo"])
            runner, runner_args = known_repo.command_at(version)
            kept_reqs = tuple(r for r in env.requirements if canonical(r) not in known_repo.runner_only)
            notes += ["runner_only_requirements_dropped"] if len(kept_reqs) < len(env.requirements) else []
            env = dataclasses.replace(
                env,
                undated=known_repo.test_data,
                requirements=(*kept_reqs, *known_repo.requirements),
                runner=runner,
                runner_args=runner_args,
                services=known_repo.services,
                version=release if "version_from_tags" in notes else None,
            )
            notes += ["locale_as_c_utf8"] if locale_only(spec) else []
            notes += ["conda_env_pip_only"] if spec.get("packages") == "environment.yml" else []
            job = MineJob(row["repo"], _NO_FILTERS, relevant_files=3, require_issue=False, issues=None)
            outcome = mine_swebench_row(repo, where, {**row, "test_patch": test_patch}, job)
        if outcome.reason != "kept" or outcome.instance is None:
            raise Drop(outcome.reason, outcome.detail or "")
        try:
            find_python(env.python)
        except InterpreterUnavailable:
            notes.append("python_missing_here")
        out = dict(outcome.instance)
        out.update(
            created_at=created,
            FAIL_TO_PASS=_labels(row.get("FAIL_TO_PASS")),
            PASS_TO_PASS=_labels(row.get("PASS_TO_PASS")),
            environment=env.to_json(),
        )
        return out, notes

    def convert_js(self, where: str, row: dict[str, Any], clone: Path) -> tuple[dict[str, Any], list[str]]:
        """A JavaScript/TypeScript row (swebench_js.py): the harness's runner and Node version on
        the lock file's dependencies as of the base commit's date. Its labels are not this
        project's test ids (swebench_js.resolve maps them against a run's ids): the instance
        leaves them out, for `python -m data.validate` to label it, noted `labels_not_ids`."""
        with Repo(str(clone)) as repo:
            created = row.get("created_at") or repo.run("log", "-1", "--format=%cI", row["base_commit"], check=False)
            created = _utc(created if isinstance(created, str) else created.decode().strip())
            job = MineJob(row["repo"], _NO_FILTERS, relevant_files=3, require_issue=False, issues=None)
            outcome = mine_swebench_row(repo, where, row, job)
        if outcome.reason != "kept" or outcome.instance is None:
            raise Drop(outcome.reason, outcome.detail or "")
        out = dict(outcome.instance)
        env = swebench_js.environment(row["repo"], created)
        out.update(created_at=created, FAIL_TO_PASS=None, PASS_TO_PASS=None, environment=env.to_json())
        return out, ["labels_not_ids"]


def _without_noops(spec: dict[str, Any], read: declared.Reader) -> tuple[dict[str, Any], list[str]]:
    """The spec without the pre_install steps the harness would refuse (pre_install_requirements)
    that change nothing at the base commit (noop_steps), and those steps. A step the harness
    reads as a requirement stays one, no-op or not: the environments validated with it keep
    their cache keys."""
    steps = list(spec.get("pre_install") or [])
    refused = [s for s in steps if not _reads_as_requirement(s)]
    dropped = noop_steps(refused, read)
    if not dropped:
        return spec, []
    return {**spec, "pre_install": [s for s in steps if s not in dropped]}, dropped


def _reads_as_requirement(step: str) -> bool:
    try:
        pre_install_requirements([step])
    except Drop:
        return False
    return True


def _labels(value: Any) -> list[str] | None:
    """SWE-bench stores the labels as a JSON string of a list (or a list)."""
    if value is None:
        return None
    return list(json.loads(value) if isinstance(value, str) else value)


def _utc(when: str | None) -> str | None:

    return utc(when) if when else None


def iter_rows(paths: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """SWE-bench rows; a file of Multi-SWE-bench rows (its first row says) in SWE-bench's fields."""
    for path in paths:
        first = next(iter_records(path), None)
        if first is not None and isinstance(first[1], dict) and swebench_js.is_multi_swe_bench(first[1]):
            yield from ((where, swebench_js.swebench_row(row)) for where, row in iter_records(path))
        else:
            yield from iter_swebench_rows(path)


def convert(rows: list[str], clones: list[str], out_dir: str, mined: list[str], overwrite: bool) -> dict[str, Any]:
    named = {name: path for name, path in map(parse_clone, clones) if name}
    unnamed = [path for name, path in map(parse_clone, clones) if not name]
    for path in unnamed:  # a plain path: the repository its origin remote names
        with Repo(str(path)) as repo:
            named.setdefault(repo.owner_name(), path)
    converter = Converter(named, repos.swebench_specs(), mined_test_patches(mined))
    out = prepare_output(out_dir, overwrite)
    counts: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    examples: defaultdict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    started = time.monotonic()
    with ShardWriter(out, shard_size=1000) as writer:
        for where, row in iter_rows(rows):
            iid = row["instance_id"]
            try:
                if iid in seen:
                    raise Drop("duplicate", f"{where}: {iid} again (the first is kept)")
                seen.add(iid)
                instance, row_notes = converter.convert(where, row)
            except Drop as d:
                counts[d.reason] += 1
                if len(examples[d.reason]) < EXAMPLES:
                    examples[d.reason].append(f"{iid}: {d.detail}" if d.detail else iid)
                continue
            except GitError as e:
                counts["git_error"] += 1
                examples["git_error"].append(f"{iid}: {e}"[:300])
                continue
            Instance.from_row(instance, where)  # the schema check, naming the field
            writer.write(instance)
            counts["kept"] += 1
            for note in row_notes:
                notes[note] += 1
                if len(examples[note]) < EXAMPLES:
                    examples[note].append(iid)
    manifest = {
        "source": {"rows": rows, "clones": {k: str(v) for k, v in named.items()}, "test_patches": mined},
        "instances": counts["kept"],
        "counts": dict(counts),
        "notes": dict(notes),
        "examples": dict(examples),
        "shards": writer.shards,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    write_manifest(out, manifest)
    return manifest


def as_official(ids: list[str], bare: bool) -> set[str]:
    """Test ids made here in the form official labels have them: pytest node ids as they are,
    or, where the official labels are bare function names (SWE-bench's sympy log parser reads
    `bin/test`'s console, which prints `test_x ok`), the function name of each."""
    return {t.rsplit("::", 1)[-1] for t in ids} if bare else set(ids)


def compare(official_dir: str, validated_dir: str) -> dict[str, Any]:
    """Per instance: the validated FAIL_TO_PASS vs the official one (equal, or the tests only
    one side has), how much of the official PASS_TO_PASS the validated one covers, and the
    official tests validation found needing the internet (its needs_network)."""

    official = {i.instance_id: i for i in read_instances(official_dir, 0)}
    labels_path = Path(validated_dir) / "_labels.json"
    derived = {d["instance_id"]: d for d in json.loads(labels_path.read_text())} if labels_path.is_file() else {}
    report: dict[str, Any] = {}
    for iid, inst in sorted(official.items()):
        d = derived.get(iid)
        if d is None:
            report[iid] = {"outcome": "not_validated"}
            continue
        f_off, p_off = set(inst.fail_to_pass or ()), set(inst.pass_to_pass or ())
        bare = not any("::" in t for t in f_off | p_off)  # sympy's labels: function names
        f_der, p_der, network = (
            as_official(d.get(k) or [], bare) for k in ("FAIL_TO_PASS", "PASS_TO_PASS", "needs_network")
        )
        report[iid] = {
            "outcome": d["outcome"],
            "reason": d["reason"],
            "fail_to_pass_equal": f_off == f_der,
            "fail_to_pass_official_only": sorted(f_off - f_der),
            "fail_to_pass_derived_only": sorted(f_der - f_off),
            "pass_to_pass_official": len(p_off),
            "pass_to_pass_derived": len(p_der),
            "pass_to_pass_official_covered": len(p_off & p_der),
            "pass_to_pass_official_missing": sorted(p_off - p_der)[:20],
            "official_needing_network": sorted((f_off | p_off) & network),
            "flaky": d["flaky"],
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data.swebench_exec", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", action="append", default=[], help="SWE-bench rows: JSON, JSONL or Parquet")
    parser.add_argument("--git", action="append", default=[], help="owner/name=CLONE, or a clone (repeatable)")
    parser.add_argument("--out", help="output directory: v3 shards and _manifest.json")
    parser.add_argument("--test-patches", action="append", default=[], help="data.build output to take test patches")
    parser.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    parser.add_argument("--compare", nargs=2, metavar=("OFFICIAL", "VALIDATED"), help="compare labels, print JSON")
    args = parser.parse_args(argv)
    try:
        if args.compare:
            print(json.dumps(compare(*args.compare), indent=1))
            return 0
        if not args.rows or not args.out:
            raise UserError("give --rows FILE and --out DIR (or --compare OFFICIAL VALIDATED)")
        manifest = convert(args.rows, args.git, args.out, args.test_patches, args.overwrite)
    except (UserError, OSError, GitError, ValueError) as exc:
        fail(parser.prog, str(exc))
    print(json.dumps({k: manifest[k] for k in ("instances", "counts", "notes")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
