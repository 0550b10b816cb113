"""Filter rules one by one: the pure predicates, then each switch and limit on a small history."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from data.build import BuildConfig, build
from data.fixtures.synthetic import RepoBuilder
from data.git.diffs import is_code_path, is_test_path
from data.git.pulls import linked_issues
from data.mining.filters import REASONS, FilterConfig, context_size, is_bot, over_limits, summary_table


@pytest.mark.parametrize(
    "author,title,branch,bot",
    [
        ("dependabot[bot] <x@y>", "Update requests", "", True),
        ("Renovate Bot <r@x>", "Update all", "", True),
        ("Dev <d@x>", "Bump urllib3 from 1.26 to 2.0", "", True),
        ("Dev <d@x>", "bumped the minimum version", "", True),
        ("Dev <d@x>", "Update deps", "dependabot/pip/urllib3-2.0", True),
        ("Dev <d@x>", "Fix bumpy scrolling", "", False),
        ("Dev <d@x>", "Fix parse", "alice/fix", False),
    ],
)
def test_bot_rule(author: str, title: str, branch: str, bot: bool) -> None:
    assert is_bot(author, title, branch) is bot


def test_linked_issue_keywords() -> None:
    texts = [
        "Fixes #12 and CLOSES #3; resolved: #40",
        "fix #12 again",
        "closed acme/w#7",
        "Resolves https://github.com/acme/w/issues/8",
        "fixes other/repo#9",
        "see #11",
        "fixes #5 (this PR)",
        "prefixes #13",
    ]
    assert linked_issues(texts, "acme/w", own_number=5) == [3, 7, 8, 12, 40]


@pytest.mark.parametrize(
    "path,test,code",
    [
        ("pkg/core.py", False, True),
        ("tests/test_core.py", True, True),
        ("pkg/tests/util.py", True, True),
        ("test_requests.py", True, True),
        ("src/x_test.go", True, True),
        ("web/a.spec.ts", True, True),
        ("conftest.py", True, True),
        ("README.md", False, False),
        ("docs/conf.txt", False, False),
        ("testing.md", False, False),
        ("pkg/contest.py", False, True),
        ("Lib/ext/mod.C", False, True),
    ],
)
def test_path_rules(path: str, test: bool, code: bool) -> None:
    assert (is_test_path(path), is_code_path(path)) == (test, code)


def test_limits_and_summary_table() -> None:
    cfg = FilterConfig(max_files=2, max_hunks=3, max_changed_lines=4)
    assert [over_limits(*x, cfg) for x in [(2, 3, 4), (3, 1, 1), (1, 4, 1), (1, 1, 5)]] == [
        None,
        "too_many_files",
        "too_many_hunks",
        "too_many_lines",
    ]
    assert over_limits(99, 99, 99, FilterConfig(max_files=0, max_hunks=0, max_changed_lines=0)) is None
    table = summary_table(Counter({"kept": 3, "bot": 1}), 4)
    assert "\nkept                      3   75.0%\n" in table and table.count("\n") == len(REASONS) + 3


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """#1 one-line fix (linked to #9), #2 a 3-hunk 40-line change, #3 a fix with a big context."""
    path = tmp_path_factory.mktemp("small")
    r = RepoBuilder(path, origin_url="https://github.com/acme/small")
    body = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(30))
    r.commit({"a.py": "x = 1\n", "b.py": body, "big.py": "# pad\n" * 2000}, "init")
    r.squash_pr(1, "Fix x, fixes #9", {"a.py": "x = 2\n"})
    r.squash_pr(
        2,
        "Rework b",
        {
            "b.py": body.replace("return 0", "return -0")
            .replace("return 15", "return -15")
            .replace("return 29", "return -29")
            + "".join(f"# {i}\n" for i in range(34))
        },
    )
    r.squash_pr(3, "Fix big", {"big.py": "# pad\n" * 1999 + "# end\n"})
    return path


def _counts(repo: Path, tmp: Path, **kw: object) -> dict[str, int]:
    filters = FilterConfig(**kw)  # type: ignore[arg-type]
    manifest = build(BuildConfig(git=(str(repo),), out=str(tmp), overwrite=True, filters=filters))
    return {k: v for k, v in manifest["counts"].items() if v}


def test_each_limit_switch(small: Path, tmp_path: Path) -> None:
    assert _counts(small, tmp_path) == {"kept": 3}
    assert _counts(small, tmp_path, max_hunks=2) == {"kept": 2, "too_many_hunks": 1}
    assert _counts(small, tmp_path, max_changed_lines=10) == {"kept": 2, "too_many_lines": 1}
    assert _counts(small, tmp_path, max_files=0, max_changed_lines=0, max_context_chars=5000) == {
        "kept": 2,
        "context_too_long": 1,
    }
    assert _counts(small, tmp_path, require_linked_issue=True) == {"kept": 1, "no_linked_issue": 2}
    exclude = tmp_path / "ids.txt"
    exclude.write_text("# SWE-bench ids\nacme__small-2\n")
    manifest = build(BuildConfig(git=(str(small),), out=str(tmp_path / "x"), exclude=(str(exclude),)))
    assert manifest["counts"]["excluded"] == 1 and manifest["counts"]["kept"] == 2


def test_relevant_files_respect_k_and_the_budget(tmp_path: Path) -> None:
    r = RepoBuilder(tmp_path / "r")
    r.commit(
        {
            "p/__init__.py": "",
            "p/a.py": "from p import b, c, d\n",
            "p/b.py": "B = 1\n",
            "p/c.py": "C = '" + "c" * 500 + "'\n",
            "p/d.py": "D = 1\n",
            "p/e.py": "import p.a\n",
        },
        "init",
    )
    r.squash_pr(1, "Change a", {"p/a.py": "from p import b, c, d\n\nA = 1\n"})

    def context(**kw: object) -> list[str]:
        out = tmp_path / f"o{len(kw)}{kw.get('relevant_files', '')}"
        cfg = BuildConfig(
            git=(str(r.path),),
            out=str(out),
            **{k: v for k, v in kw.items() if k != "filters"},
            filters=kw.get("filters", FilterConfig()),
        )  # type: ignore[arg-type]
        build(cfg)
        return [f["path"] for f in pads.dataset(out).to_table().to_pylist()[0]["code_context"]]

    assert context() == ["p/a.py", "p/b.py", "p/c.py", "p/d.py"]  # imports first, K = 3
    assert context(relevant_files=5) == ["p/a.py", "p/b.py", "p/c.py", "p/d.py", "p/e.py"]
    assert context(relevant_files=0) == ["p/a.py"]
    # p/c.py would overflow a 200-character budget: skipped, the next candidate is taken.
    assert context(relevant_files=5, filters=FilterConfig(max_context_chars=200)) == [
        "p/a.py",
        "p/b.py",
        "p/d.py",
        "p/e.py",
    ]


def test_context_measured_in_tokens_with_a_tokenizer(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"})
    )
    cfg = FilterConfig(tokenizer=str(tmp_path))
    assert context_size(["one two three", "four"], cfg) == 4
    assert context_size(["one two three", "four"], FilterConfig()) == 17
