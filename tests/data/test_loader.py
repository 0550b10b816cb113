"""The training loader: deterministic order, exact resume from a cursor, held-out split, budget."""

import pyarrow.parquet as pq
import pytest

from data.bugs.proof import why_unusable
from data.loader import InstanceLoader, is_heldout
from data.schema import to_table


class CharTokenizer:
    """One token per character of the templated prompt: deterministic and fast."""

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        return [ord(c) % 256 for m in messages for c in m["content"]]


def _row(i: int, size: int = 10) -> dict:
    return {
        "instance_id": f"r-{i}",
        "repo": "o/r",
        "base_commit": "c" * 40,
        "problem_statement": f"bug {i}",
        "patch": "",
        "test_patch": None,
        "code_context": [{"path": "a.py", "content": "x" * size}],
        "oracle_new_content": [{"path": "a.py", "content": "y"}],
    }


@pytest.fixture()
def dataset(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    for shard in range(3):
        pq.write_table(to_table([_row(shard * 10 + i) for i in range(7)]), d / f"shard-{shard}.parquet")
    pq.write_table(to_table([_row(999)]), d / "_shard-3.parquet")  # being written: ignored
    return str(d)


def _ids(loader, n):
    return [it.instance_id for it in loader.next_batch(n)]


def test_order_is_a_seeded_permutation_of_all_rows(dataset):
    first = _ids(InstanceLoader(dataset, CharTokenizer(), seed=1), 21)
    assert sorted(first) == sorted(f"r-{s * 10 + i}" for s in range(3) for i in range(7))
    assert first == _ids(InstanceLoader(dataset, CharTokenizer(), seed=1), 21)
    assert first != _ids(InstanceLoader(dataset, CharTokenizer(), seed=2), 21)


def test_resume_from_cursor_continues_exactly(dataset):
    straight = InstanceLoader(dataset, CharTokenizer(), seed=3)
    expected = _ids(straight, 30)  # crosses into the second epoch
    a = InstanceLoader(dataset, CharTokenizer(), seed=3)
    head = _ids(a, 11)
    b = InstanceLoader(dataset, CharTokenizer(), seed=3)
    b.load_state_dict(a.state_dict())
    assert head + _ids(b, 19) == expected
    assert expected[21:] != expected[:9]  # the second epoch is reshuffled


def test_cursor_refuses_another_dataset_or_seed(dataset):
    state = InstanceLoader(dataset, CharTokenizer(), seed=3).state_dict()
    with pytest.raises(ValueError, match="seed changed"):
        InstanceLoader(dataset, CharTokenizer(), seed=4).load_state_dict(state)


def test_heldout_split_is_disjoint_and_stable(dataset):
    train = set(_ids(InstanceLoader(dataset, CharTokenizer(), heldout_fraction=0.3), 21 * 2))
    held = set(_ids(InstanceLoader(dataset, CharTokenizer(), heldout_fraction=0.3, split="heldout"), 5))
    assert train.isdisjoint(held) and held
    assert all(is_heldout(i, 0.3) for i in held) and not any(is_heldout(i, 0.3) for i in train)


def test_too_long_prompts_are_dropped_and_counted(tmp_path):
    rows = [_row(0, size=10), _row(1, size=5000), _row(2, size=10)]
    path = tmp_path / "one.parquet"
    pq.write_table(to_table(rows), path)
    loader = InstanceLoader(str(path), CharTokenizer(), max_prompt_tokens=3000)
    assert sorted(_ids(loader, 2)) == ["r-0", "r-2"]
    assert loader.stats.dropped_too_long <= 1
    _ids(loader, 2)
    assert loader.stats.dropped_too_long >= 1
    with pytest.raises(ValueError, match="fits data.max_prompt_tokens"):
        InstanceLoader(str(path), CharTokenizer(), max_prompt_tokens=10).next_batch(1)


def test_missing_path_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.path"):
        InstanceLoader(str(tmp_path / "nope"), CharTokenizer())


def test_a_reward_that_runs_tests_refuses_unlabelled_rows(tmp_path):
    labelled = [dict(_row(i), FAIL_TO_PASS=["t.py::test_a"], PASS_TO_PASS=[]) for i in range(2)]
    path = tmp_path / "mixed.parquet"
    pq.write_table(to_table([*labelled, _row(2)]), path)
    with pytest.raises(ValueError, match=r"reward.kind=tests .* has 1 of 3 row\(s\) without them.*data.validate"):
        InstanceLoader(str(path), CharTokenizer()).require_test_labels("reward.kind=tests")
    pq.write_table(to_table(labelled), path)
    InstanceLoader(str(path), CharTokenizer()).require_test_labels("reward.kind=tests")  # all labelled: accepted
    old = pq.read_table(path).drop_columns(["FAIL_TO_PASS", "PASS_TO_PASS", "environment"])  # a schema-v2 shard
    pq.write_table(old, path)
    with pytest.raises(ValueError, match="has 2 of 2 row"):
        InstanceLoader(str(path), CharTokenizer()).require_test_labels("reward.kind=hybrid")


def test_selfplay_refuses_instances_it_cannot_prove_bugs_in(tmp_path):
    """train.py's check with trainer.selfplay=true (data/bugs/proof.py why_unusable): an
    instance whose snapshot is a git commit is named, before anything starts."""
    files = dict(_row(0), test_patch="diff --git a/t.py b/t.py\n", environment='{"snapshot": "files"}')
    git = dict(_row(1), test_patch="diff --git a/t.py b/t.py\n", environment='{"snapshot": "git"}')
    path = tmp_path / "mixed.parquet"
    pq.write_table(to_table([files, git]), path)
    loader = InstanceLoader(str(path), CharTokenizer())
    with pytest.raises(
        ValueError, match=r"trainer.selfplay=true: .* has 1 of 2 row\(s\) .*r-1: git_snapshot .*reward.execution.repos="
    ):
        loader.require_rows("trainer.selfplay=true", ("environment", "test_patch"), why_unusable)
    pq.write_table(to_table([files]), path)
    InstanceLoader(str(path), CharTokenizer()).require_rows("x", ("environment", "test_patch"), why_unusable)
    demo = InstanceLoader("demo", CharTokenizer())
    demo.require_rows("trainer.selfplay=true", ("environment", "test_patch"), why_unusable)  # the demo set: every row
