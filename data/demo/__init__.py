"""The embedded demo data set: small bug-fix instances the project wrote itself, as Parquet.

The default job (`python train.py` on a laptop) and the test suite train on it, so it must be
small enough for a 135M model (whole prompts: 0.8k-1.9k SmolLM2 tokens, data/prompt.py) and
real enough to be worth learning from: every instance is a plausible bug in a small Python
module of a fictional repository, an issue written as its user filed it, and the oracle fix.
No third-party text or code is in it.

Sources, one directory per instance, plain files so that a reviewer reads diffs of them:

    data/demo/src/<instance_id>/
        issue.md            the issue text (-> problem_statement)
        before/<path>       every file the fix changes, at the base commit; absent if the fix
                            creates the file
        after/<path>        the same files once fixed; absent if the fix deletes the file
        context/<path>      optional unchanged files the model also sees (after the changed
                            ones); they also make the package importable for the tests
        test_patch/<path>   pytest files the fix adds: they fail on before/, pass on after/
        tests.json          FAIL_TO_PASS and PASS_TO_PASS (pytest node ids), as measured by
                            `python -m data.validate` in the sandbox; written by
                            `python -m data.demo --labels-from VALIDATED_DIR`

`python -m data.demo` rebuilds `data/demo/demo.parquet` (committed) from them; the same
sources always give the same bytes. Derived fields: from an id "demo__<name>-<number>", `repo`
= "swe-rl-demo/<name>" and `pr_number` = <number>; `base_commit` = sha1 of the id; `patch` and
`test_patch` = git-style unified diffs (3 lines of context) of before -> after. Unlike mined
data, test files are always new files in `test_patch` (real PRs often edit existing ones).

Adding an instance: write its directory (keep each package self-contained: before/ plus
context/ must import without the rest of the repository), run `python -m data.demo`, then
`pytest tests/data/test_demo.py`, which checks that the patch reproduces after/ exactly and
that the tests fail before the fix and pass after it. Where an instance continues an earlier
one's module, start from that instance's after/ files, so that the repository's history stays
consistent. data/demo/conftest.py keeps pytest from collecting the sources' test files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

DEMO_DIR = Path(__file__).resolve().parent
SOURCE_DIR = DEMO_DIR / "src"
REPO_OWNER = "swe-rl-demo"


def demo_parquet_path() -> Path:
    """The committed Parquet file of the demo set."""
    return DEMO_DIR / "demo.parquet"


def load_demo_rows() -> list[dict[str, Any]]:
    """Every demo instance as a dict of the schema's fields, in id order."""
    return pq.read_table(demo_parquet_path()).to_pylist()
