"""The prompt builder, checked against a hand-written expected prompt; the file order it draws."""

from collections import Counter

from data.demo import load_demo_rows
from data.prompt import (
    FORMAT_INSTRUCTIONS,
    SYSTEM_PROMPT,
    build_messages,
    encode_prompt,
    shuffled_files,
    user_message,
)
from data.schema import Instance
from reward import oracle_answer, score_output


def test_user_message_by_hand():
    msg = user_message("  Crash on empty input\n", {"pkg/a.py": "x = 1\n", "b.py": "y = ```\n"})
    expected = (
        "We are fixing the following issue in a repository.\n\n"
        "--- BEGIN ISSUE ---\nCrash on empty input\n--- END ISSUE ---\n\n"
        "Relevant files, with their full content:\n\n"
        "--- BEGIN FILES ---\n"
        "### pkg/a.py\n```\nx = 1\n```\n\n"
        # A file holding a triple backtick gets a longer fence, and a missing final newline is added.
        "### b.py\n````\ny = ```\n````\n"
        "--- END FILES ---\n\n" + FORMAT_INSTRUCTIONS
    )
    assert msg == expected


def test_messages_and_format_instructions():
    inst = Instance(
        "i",
        "o/r",
        "c",
        problem_statement="bug",
        patch="",
        test_patch=None,
        code_context={"m.py": ""},
        oracle_new_content={},
    )
    system, user = build_messages(inst, seed=0)
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert "<think>" in SYSTEM_PROMPT and "<solution>" in SYSTEM_PROMPT
    assert user["role"] == "user" and "### m.py\n```\n```" in user["content"]
    # The instructions show exactly the block syntax the reward's regular expression parses.
    assert "```python\n### path/to/file.py\n<<<<<<< SEARCH\n" in FORMAT_INSTRUCTIONS
    assert "\n=======\n" in FORMAT_INSTRUCTIONS and "\n>>>>>>> REPLACE\n```" in FORMAT_INSTRUCTIONS


class _Tok:
    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and tokenize
        return {"input_ids": [len(m["content"]) for m in messages]}


def test_encode_prompt_accepts_batch_encoding():
    assert encode_prompt(_Tok(), [{"role": "user", "content": "abc"}]) == [3]


def _files_shown(user_content: str) -> list[str]:
    return [line[4:] for line in user_content.splitlines() if line.startswith("### ") and "path/to" not in line]


def test_changed_file_position_is_spread_evenly():
    # Stored order puts the changed file first (data/schema.py); over 4,000 instances its
    # position in the prompt must be close to uniform over the 4 slots: chi-square with 3
    # degrees of freedom under 16.27 (p = 0.001). Stored order shown as is would give 4,000 at 0.
    context = {"pkg/changed.py": "x = 1\n", "pkg/a.py": "", "pkg/b.py": "", "pkg/c.py": ""}
    n = 4000
    positions = Counter(list(shuffled_files(context, 0, f"acme__w-{i}")).index("pkg/changed.py") for i in range(n))
    chi2 = sum((positions[k] - n / 4) ** 2 / (n / 4) for k in range(4))
    assert sorted(positions) == [0, 1, 2, 3] and chi2 < 16.27, positions


def test_same_seed_same_prompt_other_seed_other_order():
    context = {f"m{i}.py": f"V = {i}\n" for i in range(6)}
    inst = Instance("acme__w-7", "acme/w", "c", "bug", "", None, context, {})
    assert build_messages(inst, seed=3) == build_messages(inst, seed=3)
    # The stored order does not matter, only (seed, instance id) does.
    reversed_inst = Instance("acme__w-7", "acme/w", "c", "bug", "", None, dict(reversed(context.items())), {})
    assert build_messages(reversed_inst, seed=3) == build_messages(inst, seed=3)
    orders = {tuple(_files_shown(build_messages(inst, seed=s)[1]["content"])) for s in range(5)}
    assert len(orders) == 5 and all(sorted(o) == sorted(context) for o in orders)
    # Another instance under the same seed gets its own order.
    other = Instance("acme__w-8", "acme/w", "c", "bug", "", None, context, {})
    assert _files_shown(build_messages(other, 3)[1]["content"]) != _files_shown(build_messages(inst, 3)[1]["content"])


def test_reward_does_not_depend_on_file_order():
    row = next(r for r in load_demo_rows() if len(r["code_context"]) > 1)
    inst = Instance.from_row(row)
    orders = (shuffled_files(inst.code_context, seed, inst.instance_id) for seed in range(20))
    shuffled = next(o for o in orders if list(o) != list(inst.code_context))  # a seed that moves them
    answer = oracle_answer(inst.code_context, inst.oracle_new_content)
    wrong = answer.replace("=======\n", "=======\n# an extra line\n", 1)
    for output in (answer, wrong):
        assert score_output(shuffled, inst.oracle_new_content, output) == score_output(
            inst.code_context, inst.oracle_new_content, output
        )
    assert score_output(shuffled, inst.oracle_new_content, answer).reward == 1.0
    assert score_output(shuffled, inst.oracle_new_content, wrong).reward < 1.0
