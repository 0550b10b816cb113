"""Which PR is a SWE-bench row's: its changes outside the tests are the gold patch on the gold
patch's files; a changelog or AUTHORS beside them is ignored and said, other code is not."""

from __future__ import annotations

import subprocess

import pytest

from data.git.repo import Repo
from data.swebench_exec import (
    Drop,
    environment,
    matches_gold,
    mined_test_patch,
    pre_install_requirements,
    release_tag,
    spec_for,
    spec_version,
)
from reward.execution import repos


def _diff(path: str, old: str, new: str) -> str:
    return f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


GOLD = _diff("requests/models.py", "x = 1", "x = 2")
CHANGELOG = _diff("HISTORY.rst", "0.1", "0.2")
AUTHORS = _diff("AUTHORS", "a", "b")
OTHER_CODE = _diff("requests/utils.py", "y = 1", "y = 2")


def test_the_gold_patch_alone_matches_with_nothing_ignored():
    assert matches_gold(GOLD, GOLD) == []
    # index lines and hunk headers' function names may differ between equal diffs
    assert matches_gold(GOLD.replace("1111111..2222222", "abcdef0..1234567"), GOLD) == []


def test_changelog_and_authors_beside_the_fix_are_ignored_and_named():
    assert matches_gold(CHANGELOG + GOLD + AUTHORS, GOLD) == ["HISTORY.rst", "AUTHORS"]
    assert matches_gold(_diff("docs/api.md", "a", "b") + GOLD, GOLD) == ["docs/api.md"]


def test_other_code_or_a_different_fix_is_not_the_row():
    assert matches_gold(GOLD + OTHER_CODE, GOLD) is None
    assert matches_gold(_diff("requests/models.py", "x = 1", "x = 3"), GOLD) is None
    assert matches_gold(CHANGELOG, GOLD) is None  # the fix itself missing


def test_a_mined_pr_with_a_changelog_gives_its_test_patch():
    row = {"base_commit": "c0", "patch": GOLD}
    tests = _diff("tests/test_models.py", "a", "b")
    mined = {"c0": [(OTHER_CODE, "wrong"), (CHANGELOG + GOLD, tests)], "c1": [(GOLD, "other base")]}
    assert mined_test_patch(mined, row) == (tests, ["HISTORY.rst"])
    assert mined_test_patch(mined, {"base_commit": "c2", "patch": GOLD}) is None


def test_a_row_without_a_version_takes_the_release_line_its_commit_states():
    from data.swebench_exec import infer_version

    files = {
        "src/flask/__init__.py": '__version__ = "2.0.1.dev0"\n',
        "django/__init__.py": "from x import y\n\nVERSION = (3, 0, 0, 'alpha', 0)\n",
        "sympy/release.py": '__version__ = "1.1.2.dev"\n',
    }
    assert infer_version(files.get, "pallets/flask") == "2.0"
    assert infer_version(files.get, "django/django") == "3.0"
    assert infer_version(files.get, "sympy/sympy") == "1.1"
    assert infer_version(files.get, "psf/requests") is None


def test_pre_install_steps_become_requirements_or_a_named_drop():
    """sphinx 3.x-4.x's seds on setup.py tighten pins (the new pins are installed beside the
    file's own); its sed on tox.ini is SWE-bench's tox invocation, not the harness's; a sed that
    repairs a file (pytest 6.3's `>=>=`) is not a requirement: the row is dropped, naming it."""
    steps = [
        "sed -i 's/pytest/pytest -rA/' tox.ini",
        "sed -i 's/Jinja2>=2.3/Jinja2<3.0/' setup.py",
        "sed -i 's/alabaster>=0.7,<0.8/alabaster>=0.7,<0.7.12/' setup.py",
        "sed -i \"s/'packaging',/'packaging', 'markupsafe<=2.0.1',/\" setup.py",
        "grep -q 'sphinxcontrib-htmlhelp>=2.0.0' setup.py && "
        "sed -i 's/sphinxcontrib-htmlhelp>=2.0.0/sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4/' setup.py",
        'sed -i \'s/requires = \\["setuptools",/requires = \\["setuptools==68.0.0",/\' pyproject.toml',
    ]
    assert pre_install_requirements(steps) == [
        "Jinja2<3.0",
        "alabaster>=0.7,<0.7.12",
        "markupsafe<=2.0.1",
        "sphinxcontrib-htmlhelp>=2.0.0,<=2.0.4",
        "setuptools==68.0.0",
    ]
    for step in ("sed -i 's/>=>=/>=/' setup.cfg", "wget -O /tmp/x http://example.invalid/x.tgz"):
        with pytest.raises(Drop, match="not supported"):
            pre_install_requirements([step])


def test_release_tag_is_the_newest_release_a_commit_descends_from(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    tags = ((1, "4.4.0"), (2, "v4.5.0"), (3, "v5.1.dev"), (4, "7.0.0.dev0"), (5, "not-a-release"))
    for n, tag in tags:
        (tmp_path / "f").write_text(str(n))
        subprocess.run([*git, "add", "f"], check=True)
        subprocess.run([*git, "commit", "-qm", str(n)], check=True)
        if tag:
            subprocess.run([*git, "tag", tag], check=True)
    with Repo(str(tmp_path)) as repo:
        assert release_tag(repo, "HEAD~3") == "4.5.0"
        assert release_tag(repo, "HEAD~2") == "5.1.dev"  # astropy's main branch: 5.1 starts here
        assert release_tag(repo, "HEAD~4") == "4.4.0"
        assert release_tag(repo, "HEAD~1") == "7.0.0.dev0"  # setuptools_scm's next-dev tag: 7.0
        assert release_tag(repo, "HEAD") is None  # a tag that names no release


def test_a_tagged_release_line_takes_the_specs_name_for_it_or_the_newest_listed_below():
    known = {"4.3", "5.1", "5.2", "v5.3"}  # astropy's specs keep SWE-bench's "v5.3"
    assert spec_version("5.1", known) == ("5.1", False)
    assert spec_version("5.3", known) == ("v5.3", False)
    assert spec_version("6.0", known) == ("v5.3", True)  # a line the specs lack: the newest below, noted
    assert spec_version("4.2", known) is None  # nothing listed below it


def test_scikit_learns_spec_builds_with_its_own_packages_from_its_quoted_list():
    """Its packages are shell words ('numpy==1.19.2'), its install passes pip options before
    the project and builds without isolation: the project's build-requires stay out."""
    spec = spec_for(repos.swebench_specs(), "scikit-learn/scikit-learn", "1.3")
    env = environment(spec, [], lambda rel: None, "2023-06-30T00:00:00Z")
    assert env.install == "snapshot" and env.build_requires is False
    assert env.requirements[:3] == ("numpy==1.19.2", "scipy==1.5.2", "cython==3.0.10")
    astropy = environment(spec_for(repos.swebench_specs(), "astropy/astropy", "5.1"), [], lambda rel: None, None)
    assert astropy.build_requires and "build_requires" not in astropy.to_json()  # the default, omitted


def test_a_refused_pre_install_step_that_changes_nothing_at_the_base_commit_is_dropped():
    """pytest 6.3's spec repairs a `>=>=` typo in setup.cfg; at commits without the typo the
    sed is a no-op and the row converts (the step is read as text, never run)."""
    from data.swebench_exec import _without_noops, noop_steps

    repair = "sed -i 's/>=>=/>=/' setup.cfg"
    clean = {"setup.cfg": "[options]\ninstall_requires =\n    attrs>=19.2.0\n    py>=1.8.2\n"}
    typo = {"setup.cfg": "[options]\ninstall_requires =\n    attrs>=>=19.2.0\n"}
    assert noop_steps([repair], clean.get) == [repair]
    assert noop_steps([repair], typo.get) == []  # it would change the file: still refused
    assert noop_steps([repair], {}.get) == [repair]  # no such file: nothing to change
    # a BRE's `+ ( )` are literal, `.` any character; a grep guard that fails makes it a no-op
    assert noop_steps(["sed -i 's/a+(b)/c/' setup.py"], {"setup.py": "a+(b)\n"}.get) == []
    assert noop_steps(["sed -i 's/x.y/z/' setup.py"], {"setup.py": "xzy\n"}.get) == []
    guarded = "grep -q 'pkg>=1' setup.py && sed -i 's/pkg>=1/pkg>=1,<2/' setup.py"
    assert noop_steps([guarded], {"setup.py": "other>=1\n"}.get) == [guarded]
    spec = {"python": "3.9", "pre_install": [repair], "install": "python -m pip install -e ."}
    kept, dropped = _without_noops(spec, clean.get)
    assert dropped == [repair] and kept["pre_install"] == []
    environment(kept, [], clean.get, None)  # converts (before: Drop("pre_install"))
    with pytest.raises(Drop, match="not supported"):
        environment(_without_noops(spec, typo.get)[0], [], typo.get, None)
    # a step read as a requirement stays one, no-op or not (sphinx's pins keep their environments)
    pin = "sed -i 's/Jinja2>=2.3/Jinja2<3.0/' setup.py"
    assert _without_noops({**spec, "pre_install": [pin]}, {}.get)[1] == []


def test_compare_reads_bare_official_names_and_names_official_tests_needing_the_network(tmp_path):
    """SWE-bench's sympy labels are function names (`test_issue_17851`) where validation here
    writes pytest node ids; an official test that validation found needing the internet is named."""
    import json

    import pyarrow.parquet as pq

    from data.demo import load_demo_rows
    from data.schema import to_table
    from data.swebench_exec import compare

    row = load_demo_rows()[0]
    bare = dict(row, FAIL_TO_PASS=["test_issue_17851"], PASS_TO_PASS=["test_a", "test_b", "test_net"])
    nodes = dict(row, instance_id="o__r-2", FAIL_TO_PASS=["t.py::test_f"], PASS_TO_PASS=["t.py::test_net"])
    (tmp_path / "official").mkdir()
    pq.write_table(to_table([bare, nodes]), tmp_path / "official" / "shard-00000.parquet")
    f = "sympy/tensor/array/tests/test_ndim_array.py::"
    labels = [
        {"instance_id": row["instance_id"], "outcome": "kept", "reason": "", "flaky": [],
         "FAIL_TO_PASS": [f + "test_issue_17851", f + "test_issue_and_18715"], "PASS_TO_PASS": [f + "test_a"],
         "needs_network": [f + "test_net"]},
        {"instance_id": "o__r-2", "outcome": "kept", "reason": "", "flaky": [],
         "FAIL_TO_PASS": ["t.py::test_f"], "PASS_TO_PASS": [], "needs_network": ["t.py::test_net"]},
    ]  # fmt: skip
    (tmp_path / "validated").mkdir()
    (tmp_path / "validated" / "_labels.json").write_text(json.dumps(labels))
    report = compare(str(tmp_path / "official"), str(tmp_path / "validated"))
    sympy_like = report[row["instance_id"]]
    assert sympy_like["fail_to_pass_official_only"] == [] and sympy_like["fail_to_pass_derived_only"] == [
        "test_issue_and_18715"
    ]
    assert sympy_like["pass_to_pass_official_covered"] == 1 and sympy_like["official_needing_network"] == ["test_net"]
    assert report["o__r-2"]["fail_to_pass_equal"] and report["o__r-2"]["official_needing_network"] == ["t.py::test_net"]
