"""The training-instance schema: the one definition every producer and consumer shares.

One instance = one merged pull request that fixes an issue (SWE-RL, section 2.1): the issue
text, the code context at the PR's base commit, and the oracle patch. The reward needs the
files both before (`code_context`) and after (`oracle_new_content`) the oracle patch, so both
are stored rather than recomputed from the diff at training time.

Producers: `data.build` (mined pull requests, SWE-bench files) and the embedded demo set.
Consumers: `data.loader` (prompts), the reward actors (scoring), evaluation.
Bump SCHEMA_VERSION whenever a field is added, removed or changes meaning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from conf.errors import UserError

# 2: appended the nullable provenance fields problem_source, linked_issues, pr_number, created_at.
# 3: appended FAIL_TO_PASS, PASS_TO_PASS and environment (running the tests; reward/execution/).
# 4: appended needs_network (tests left out of the labels because they need the internet).
SCHEMA_VERSION = 4

# One file: its repository-relative path and its full text. Lists of these keep file order
# (changed files first), which a map type would not guarantee; the prompt does not show the
# stored order but one drawn per instance (data/prompt.py: build_messages).
FILE_STRUCT = pa.struct(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("content", pa.string(), nullable=False),
    ]
)

INSTANCE_SCHEMA = pa.schema(
    [
        # Unique key, e.g. "owner__repo-1234" (SWE-bench style); the loader's cursor and the
        # train/held-out split are defined over it.
        pa.field("instance_id", pa.string(), nullable=False),
        # "owner/name" of the repository the pull request belongs to.
        pa.field("repo", pa.string(), nullable=False),
        # Commit the oracle patch applies to (the PR's merge base); code_context is read there.
        pa.field("base_commit", pa.string(), nullable=False),
        # The issue text the model sees (or the PR title + description when no issue text exists).
        pa.field("problem_statement", pa.string(), nullable=False),
        # Oracle unified diff of the non-test files: what the PR changed to fix the issue.
        pa.field("patch", pa.string(), nullable=False),
        # The PR's changes to test files, kept for evaluation harnesses; null when unknown.
        pa.field("test_patch", pa.string(), nullable=True),
        # Files at base_commit shown to the model: every file the patch changes (a file the
        # patch creates has content ""), then any relevant unchanged files. The prompt shuffles
        # them (per seed and instance), so this order is never shown as is.
        pa.field("code_context", pa.list_(FILE_STRUCT), nullable=False),
        # The changed files after the oracle patch; a deleted file has content "".
        pa.field("oracle_new_content", pa.list_(FILE_STRUCT), nullable=False),
        # Appended in version 2 (nullable, so producers that predate them stay valid):
        # Where problem_statement came from: "issue" (the linked issues' text from an issue
        # dump), "pr" (the PR's own title and description: no issue text was at hand) or
        # "swebench" (the problem_statement of a SWE-bench-format file).
        pa.field("problem_source", pa.string(), nullable=True),
        # Issue numbers the PR says it fixes ("fixes #N", "closes #N", "resolves #N").
        pa.field("linked_issues", pa.list_(pa.int64()), nullable=True),
        # The pull request's number in its repository.
        pa.field("pr_number", pa.int64(), nullable=True),
        # When the PR was merged (the merge commit's committer date), ISO 8601 in UTC.
        pa.field("created_at", pa.string(), nullable=True),
        # Appended in version 3 (nullable: v2 shards load with these null):
        # Tests that fail at base_commit with the test patch and pass with the oracle patch too
        # (pytest node ids, "tests/test_x.py::test_y"), and tests that pass both ways; written by
        # `python -m data.validate` (or taken from a SWE-bench file). Resolved = all of both pass.
        pa.field("FAIL_TO_PASS", pa.list_(pa.string()), nullable=True),
        pa.field("PASS_TO_PASS", pa.list_(pa.string()), nullable=True),
        # How to rebuild the tests' environment: a JSON object (reward/execution/environments.py,
        # EnvSpec: snapshot source, Python, requirements, resolution date, import path).
        pa.field("environment", pa.string(), nullable=True),
        # Appended in version 4 (nullable: v3 shards load with it null = not known):
        # Tests of the instance's test files that failed on the network (no internet in the
        # sandbox) after the oracle patch, so they are in neither FAIL_TO_PASS nor PASS_TO_PASS:
        # what they check is not checked here; written by `python -m data.validate`.
        pa.field("needs_network", pa.list_(pa.string()), nullable=True),
    ],
    metadata={"swe_rl.schema_version": str(SCHEMA_VERSION)},
)

FIELD_NAMES: tuple[str, ...] = tuple(INSTANCE_SCHEMA.names)


class SchemaError(UserError, ValueError):
    """An instance (or a file of them) does not match INSTANCE_SCHEMA; the message names the field."""


def files_to_dict(files: list[Mapping[str, str]] | Mapping[str, str]) -> dict[str, str]:
    """`[{path, content}, ...]` (the stored form) -> `{path: content}` (the reward's form)."""
    if isinstance(files, Mapping):
        return dict(files)
    return {f["path"]: f["content"] for f in files}


def dict_to_files(files: Mapping[str, str]) -> list[dict[str, str]]:
    """`{path: content}` -> `[{path, content}, ...]`, keeping the mapping's order."""
    return [{"path": p, "content": c} for p, c in files.items()]


def validate_instance(row: Mapping[str, Any], where: str = "instance") -> None:
    """Raise SchemaError naming the first missing or mistyped field of `row`."""
    for field in INSTANCE_SCHEMA:
        value = row.get(field.name)
        if value is None:
            if field.nullable:
                continue
            raise SchemaError(f"{where}: field {field.name!r} is missing")
        if pa.types.is_string(field.type) and not isinstance(value, str):
            raise SchemaError(f"{where}: field {field.name!r} must be a string, got {type(value).__name__}")
        if pa.types.is_integer(field.type) and (isinstance(value, bool) or not isinstance(value, int)):
            raise SchemaError(f"{where}: field {field.name!r} must be an integer, got {type(value).__name__}")
        if pa.types.is_list(field.type) and pa.types.is_integer(field.type.value_type):
            if not (isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
                raise SchemaError(f"{where}: field {field.name!r} must be a list of integers")
            continue
        if pa.types.is_list(field.type) and pa.types.is_string(field.type.value_type):
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise SchemaError(f"{where}: field {field.name!r} must be a list of strings")
            continue
        if pa.types.is_list(field.type):
            if not isinstance(value, list):
                raise SchemaError(f"{where}: field {field.name!r} must be a list of {{path, content}}")
            for i, f in enumerate(value):
                if not (
                    isinstance(f, Mapping) and isinstance(f.get("path"), str) and isinstance(f.get("content"), str)
                ):
                    raise SchemaError(f"{where}: field {field.name!r}[{i}] must be {{path: str, content: str}}")


@dataclass(frozen=True)
class Instance:
    """One instance as every consumer outside `data/` sees it: typed, files as `{path: content}`.

    Built once from a stored row (`from_row`, which validates it) by the loader and the
    evaluation; the reward, the prompt, the oracle answer and the driver read its attributes,
    never a row's columns. Field meanings: INSTANCE_SCHEMA above.
    """

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str | None
    code_context: dict[str, str]  # path -> content at base_commit, in the stored order (changed first)
    oracle_new_content: dict[str, str]  # path -> content after the oracle patch ("" = deleted)
    problem_source: str | None = None
    linked_issues: tuple[int, ...] | None = None
    pr_number: int | None = None
    created_at: str | None = None
    fail_to_pass: tuple[str, ...] | None = None  # FAIL_TO_PASS
    pass_to_pass: tuple[str, ...] | None = None  # PASS_TO_PASS
    environment: str | None = None  # JSON (reward.execution.environments.EnvSpec)
    needs_network: tuple[str, ...] | None = None  # left out of the labels: they need the internet

    @classmethod
    def from_row(cls, row: Mapping[str, Any], where: str = "instance") -> Instance:
        """A stored row (dict of the schema's fields) -> Instance; SchemaError names a bad field."""
        validate_instance(row, where)
        issues, f2p, p2p = row.get("linked_issues"), row.get("FAIL_TO_PASS"), row.get("PASS_TO_PASS")
        network = row.get("needs_network")
        return cls(
            instance_id=row["instance_id"],
            repo=row["repo"],
            base_commit=row["base_commit"],
            problem_statement=row["problem_statement"],
            patch=row["patch"],
            test_patch=row.get("test_patch"),
            code_context=files_to_dict(row["code_context"]),
            oracle_new_content=files_to_dict(row["oracle_new_content"]),
            problem_source=row.get("problem_source"),
            linked_issues=None if issues is None else tuple(issues),
            pr_number=row.get("pr_number"),
            created_at=row.get("created_at"),
            fail_to_pass=None if f2p is None else tuple(f2p),
            pass_to_pass=None if p2p is None else tuple(p2p),
            environment=row.get("environment"),
            needs_network=None if network is None else tuple(network),
        )

    def to_row(self) -> dict[str, Any]:
        """The stored form (the inverse of from_row)."""
        attrs = {"FAIL_TO_PASS": "fail_to_pass", "PASS_TO_PASS": "pass_to_pass"}
        row: dict[str, Any] = {name: getattr(self, attrs.get(name, name)) for name in FIELD_NAMES}
        row["code_context"] = dict_to_files(self.code_context)
        row["oracle_new_content"] = dict_to_files(self.oracle_new_content)
        for name, value in (
            ("linked_issues", self.linked_issues),
            ("FAIL_TO_PASS", self.fail_to_pass),
            ("PASS_TO_PASS", self.pass_to_pass),
            ("needs_network", self.needs_network),
        ):
            row[name] = None if value is None else list(value)
        return row


def to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows (dicts with every schema field) -> a table of exactly INSTANCE_SCHEMA."""
    for i, row in enumerate(rows):
        validate_instance(row, where=f"row {i}")
    return pa.Table.from_pylist([{k: row.get(k) for k in FIELD_NAMES} for row in rows], schema=INSTANCE_SCHEMA)
