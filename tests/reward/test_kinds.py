"""The reward kinds the registry holds (reward/kinds/) against docs/reward.md's table of them."""

from __future__ import annotations

import re
from pathlib import Path

from reward.kinds import REWARDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "reward.md"


def _table() -> dict[str, tuple[str, bool]]:
    """kind -> (its file, runs tests) from the table under "## Reward kinds"."""
    section = DOC.read_text().split("## Reward kinds", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := re.match(r"\| `([a-z_]+)` \| ([\w/.]+) \|.*\| (yes|no) \|$", line):
            rows[match[1]] = (match[2], match[3] == "yes")
    return rows


def test_every_registered_kind_is_in_the_docs_table_and_no_other():
    table = _table()
    assert set(table) == set(REWARDS.names()) and {"similarity", "discrete", "tests", "hybrid"} <= set(table)
    for name, (path, runs_tests) in table.items():
        kind = REWARDS.get(name)
        assert kind.__module__.replace(".", "/") + ".py" == path, name
        assert kind.uses_test_pool == runs_tests, name
