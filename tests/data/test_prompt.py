"""The prompt builder, checked against a hand-written expected prompt."""

from data.prompt import FORMAT_INSTRUCTIONS, SYSTEM_PROMPT, build_messages, encode_prompt, user_message
from data.schema import Instance


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
    system, user = build_messages(inst)
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
