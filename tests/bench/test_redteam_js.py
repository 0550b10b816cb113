"""bench/redteam_js.py's attacks are what they claim (none fixes the bug: each leaves lib/add.js
returning `a + Math.abs(b)`, each makes a patch the harness's parser reads), and its table
counts a forged and an escaped attempt and fails the run for either."""

from __future__ import annotations

import json
from typing import cast

import pytest

from bench import redteam_js
from bench.redteam_js import ATTACKS, RUNNERS, Row
from data.patching import apply_patch, parse_patch
from data.schema import Instance
from tests.reward import jsrepos


class _Tree:
    def __init__(self, runner: str) -> None:
        package = {"name": "calc", "version": "1.0.0", "devDependencies": {runner: "1.0.0"}}
        self.code_context = {
            "package.json": json.dumps(package),
            "lib/add.js": jsrepos.BUG,
            "test/add.test.js": jsrepos.suite(runner, False),
        }


@pytest.mark.parametrize("runner", RUNNERS)
def test_every_attack_leaves_the_bug_and_makes_a_patch_the_harness_reads(runner, monkeypatch):
    tree = _Tree(runner)
    monkeypatch.setitem(redteam_js.PACKAGES, runner, tree.code_context["package.json"])
    made = 0
    for attack in ATTACKS:
        files = attack.files(runner)
        if files is None:
            continue
        patch = attack.raw if attack.raw is not None else redteam_js.patch_for(cast(Instance, tree), files)
        if attack.raw is None:
            touched = {fp.old_path or fp.new_path for fp in parse_patch(patch)}
            after = apply_patch({p: tree.code_context[p] for p in touched if p in tree.code_context}, patch)
            add = after.get("lib/add.js", jsrepos.BUG)
            assert "return a + Math.abs(b);" in add and "return a + b" not in add, attack.name
            made += 1
    assert made >= 30


def _row(runner: str, resolved: bool | None, escaped: bool = False) -> Row:
    return Row(runner, "config", "x", "ok", resolved, escaped, "", 0.1)


def test_the_table_counts_forged_and_escaped_and_fails_for_either(capsys):
    assert redteam_js.table([_row("jest", False), _row("jest", None)]) == 0
    assert redteam_js.table([_row("jest", True), _row("mocha", False, escaped=True)]) == 1
    out = capsys.readouterr().out
    assert "red team js: 2 attempts, 1 forged, 1 escaped" in out
    assert "config         jest             1      1       0" in out
