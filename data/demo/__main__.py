"""`python -m data.demo [--labels-from VALIDATED_DIR]`: rebuild every demo set's Parquet file
(data/demo/demo.parquet, demo_js.parquet) from its sources (data/demo/src, src_js; how they are
laid out: data/demo/__init__.py). The same sources always give the same bytes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data.demo import DEMO_SETS, REPO_OWNER, SOURCE_DIR, DemoSet
from data.patching import make_patch
from data.schema import dict_to_files, to_table
from reward.execution.environments import EnvSpec

_ID_RE = re.compile(r"^demo__(?P<name>[a-z][a-z0-9]*)-(?P<number>[0-9]+)$")


class DemoSourceError(ValueError):
    """An instance's source directory is malformed; the message names the file or directory."""


def read_tree(root: Path) -> dict[str, str]:
    """`{repo-relative posix path: text}` of every file under `root` (empty if it is absent)."""
    if not root.is_dir():
        return {}
    files: dict[str, str] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        # A missing final newline would need git's "\ No newline at end of file" marker, which
        # difflib does not write; requiring it keeps every generated diff applicable.
        if text and not text.endswith("\n"):
            raise DemoSourceError(f"{path}: file must end with a newline")
        files[path.relative_to(root).as_posix()] = text
    return files


def parse_instance_id(instance_id: str) -> tuple[str, int]:
    """Split an id such as "demo__calspan-4" into ("calspan", 4): repository name, PR number."""
    match = _ID_RE.match(instance_id)
    if match is None:
        raise DemoSourceError(f"instance id {instance_id!r} is not of the form demo__<name>-<number>")
    return match["name"], int(match["number"])


def build_instance(instance_dir: Path, environment: str | None = None) -> dict[str, Any]:
    """One source directory -> one row of INSTANCE_SCHEMA; `environment` is the EnvSpec JSON
    its set's instances carry (None: the Python set's)."""
    instance_id = instance_dir.name
    name, number = parse_instance_id(instance_id)
    issue_path = instance_dir / "issue.md"
    if not issue_path.is_file():
        raise DemoSourceError(f"{issue_path}: missing (the issue text)")
    before = read_tree(instance_dir / "before")
    after = read_tree(instance_dir / "after")
    context = read_tree(instance_dir / "context")
    tests = read_tree(instance_dir / "test_patch")
    changed = sorted(before.keys() | after.keys())
    if not changed:
        raise DemoSourceError(f"{instance_dir}: before/ and after/ are both empty")
    for path in changed:
        if before.get(path) == after.get(path):
            raise DemoSourceError(f"{instance_dir}/after/{path}: unchanged by the fix; move it to context/")
        if path in context:
            raise DemoSourceError(f"{instance_dir}/context/{path}: also changed by the fix")
    if not tests:
        raise DemoSourceError(f"{instance_dir}/test_patch: no test files")
    return {
        "instance_id": instance_id,
        "repo": f"{REPO_OWNER}/{name}",
        "base_commit": hashlib.sha1(instance_id.encode()).hexdigest(),
        "problem_statement": issue_path.read_text(encoding="utf-8"),
        "patch": make_patch(before, after),
        "test_patch": make_patch({}, tests),
        # The schema: a file the patch creates is shown with content "", a deleted one is
        # stored with new content "".
        "code_context": dict_to_files({p: before.get(p, "") for p in changed} | context),
        "oracle_new_content": dict_to_files({p: after.get(p, "") for p in changed}),
        # Provenance (schema version 2; to_table ignores keys an older schema lacks). The id's
        # number is the fictional pull request's; linked issues and merge dates stay unknown.
        "problem_source": "issue",
        "pr_number": number,
        # Schema version 3: the tests' labels, and the environment: the instance's own files
        # are the repository, run by the project's interpreter (which has pytest) or, for the
        # JavaScript set, by this machine's node.
        **_labels(instance_dir),
        "environment": EnvSpec().to_json() if environment is None else environment,
    }


def _labels(instance_dir: Path) -> dict[str, list[str] | None]:
    path = instance_dir / "tests.json"
    if not path.is_file():
        return {"FAIL_TO_PASS": None, "PASS_TO_PASS": None}
    labels = json.loads(path.read_text(encoding="utf-8"))
    return {key: list(labels[key]) for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}


def import_labels(validated: Path, source_dirs: tuple[Path, ...] | None = None) -> int:
    """Write each instance's tests.json, in whichever of `source_dirs` (None: every demo set's)
    holds its directory, from a `data.validate` output; returns how many."""
    dirs = tuple(s.source_dir for s in DEMO_SETS.values()) if source_dirs is None else source_dirs
    written = 0
    for shard in sorted(validated.glob("*.parquet")):
        for row in pq.read_table(shard).to_pylist():
            for source_dir in dirs:
                target = source_dir / row["instance_id"] / "tests.json"
                if target.parent.is_dir():
                    labels = {key: row[key] for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}
                    target.write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
                    written += 1
    return written


def build_rows(source_dir: Path = SOURCE_DIR, environment: str | None = None) -> list[dict[str, Any]]:
    """Every instance under `source_dir`, in id order, each carrying `environment` (None: the
    Python set's)."""
    dirs = [d for d in source_dir.iterdir() if d.is_dir()] if source_dir.is_dir() else []
    if not dirs:
        raise DemoSourceError(f"{source_dir}: no instance directories")
    # Numeric order within a repository (calspan-9 before calspan-12): the order in which the
    # fixes happened where several instances evolve one module.
    dirs.sort(key=lambda d: parse_instance_id(d.name))
    return [build_instance(d, environment) for d in dirs]


def build_table(demo_set: DemoSet = DEMO_SETS["demo"]) -> pa.Table:
    """A demo set (the Python one by default) as a table of exactly INSTANCE_SCHEMA."""
    environment = EnvSpec(**demo_set.environment).to_json()
    return to_table(build_rows(demo_set.source_dir, environment))


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write `table` atomically (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def main() -> int:
    if sys.argv[1:2] == ["--labels-from"]:
        print(f"labels of {import_labels(Path(sys.argv[2]))} instances written")
    for demo_set in DEMO_SETS.values():
        table = build_table(demo_set)
        write_parquet(table, demo_set.parquet)
        repos = sorted(set(table.column("repo").to_pylist()))
        print(f"wrote {table.num_rows} instances from {len(repos)} repositories to {demo_set.parquet}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
