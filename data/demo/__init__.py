"""The embedded demo data sets: small bug-fix instances the project wrote itself, as Parquet.

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

The JavaScript set (`demo-js`, DEMO_SETS below): 4 instances over 2 small fictional CommonJS
packages without dependencies (humandur: formats and parses durations; qsbuild: writes and
reads query strings), sources in data/demo/src_js/ laid out as above, except that
test_patch/ holds test files for node's own test runner (`node:test`, `test/*.test.js`), each
package's package.json is in context/, and tests.json has JavaScript test ids
(`test/parse.test.js::parseDuration > reads a fractional amount`). Its instances' environment
is the machine's own node with nothing installed (`EnvSpec(node="host", install="none",
runner="node-test")`). It is separate from the default job's data: `demo` stays the Python set.
`data.path=demo-js` (and `--data demo-js`, `--instances demo-js`) names it wherever `demo` is
accepted; `python -m data.demo` rebuilds both sets, `--labels-from DIR` writes the labels of
whichever set holds each instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

DEMO_DIR = Path(__file__).resolve().parent
SOURCE_DIR = DEMO_DIR / "src"
REPO_OWNER = "swe-rl-demo"


@dataclass(frozen=True)
class DemoSet:
    """One embedded set: the data path that names it, its sources, its committed Parquet file,
    and the environment every instance of it carries (EnvSpec's keyword arguments)."""

    name: str
    source_dir: Path
    parquet: Path
    environment: dict[str, Any] = field(default_factory=dict)


DEMO_SETS: dict[str, DemoSet] = {
    s.name: s
    for s in (
        # The default job's data: Python modules, tested by the project's own pytest.
        DemoSet("demo", SOURCE_DIR, DEMO_DIR / "demo.parquet"),
        # CommonJS packages without dependencies, tested by node's own runner on this machine's node.
        DemoSet(
            "demo-js",
            DEMO_DIR / "src_js",
            DEMO_DIR / "demo_js.parquet",
            {"node": "host", "install": "none", "runner": "node-test"},
        ),
    )
}


def demo_parquet_path(name: str = "demo") -> Path:
    """The committed Parquet file of a demo set ("demo": the Python one)."""
    return DEMO_SETS[name].parquet


def load_demo_rows(name: str = "demo") -> list[dict[str, Any]]:
    """Every instance of a demo set as a dict of the schema's fields, in id order."""
    return pq.read_table(demo_parquet_path(name)).to_pylist()
