"""The SWE-RL prompt, in our own words: a system message asking for a thought and a solution,
and a user message with the issue, every code-context file, and the edit format.

The answer format is fixed by the reward (reward/): `<think>...</think><solution>...</solution>`,
with edits as fenced SEARCH/REPLACE blocks headed `### path`. As in the paper, each file is
shown as `### path` followed by its full content; we fence the content so the model can tell
where a file ends (the paper leaves the fencing open; this is our choice).

File order: the stored `code_context` lists the files the PR changes first (data/schema.py), so
a prompt in stored order would teach "edit the first files shown", the shortcut the paper's
relevant-file step exists to remove. `build_messages` shows the files in an order drawn from
(seed, instance_id): the same run shows an instance the same prompt every time, another seed
another order. The reward reads files by path, so it does not depend on the order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from data.schema import Instance

SYSTEM_PROMPT = (
    "You are a software engineer who fixes bugs in open-source repositories. "
    "First reason about the problem inside <think> and </think>. "
    "Then give your fix inside <solution> and </solution>."
)

FORMAT_INSTRUCTIONS = """Fix the issue above by editing the files. Write every change as a SEARCH/REPLACE edit:

```python
### path/to/file.py
<<<<<<< SEARCH
    lines copied exactly from the current file
=======
    the lines that replace them
>>>>>>> REPLACE
```

Rules:
- Start each edit with `### ` and the file's path exactly as shown above.
- The SEARCH lines must match the file exactly, indentation included; keep them short but unique.
- Put each edit in its own fenced block; use several edits for several places.
- To create a file, use the new path and leave the SEARCH part empty.

Answer in this form: <think>your reasoning</think> <solution>your edits</solution>"""


def fence(content: str) -> str:
    # A fence longer than any backtick run inside the file, so the file cannot close it early.
    longest = run = 0
    for ch in content:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    body = content if content.endswith("\n") or not content else content + "\n"
    return f"{ticks}\n{body}{ticks}"


def user_message(problem_statement: str, code_context: Mapping[str, str]) -> str:
    """The user turn: issue, then each file as `### path` + its fenced content, then the format."""
    files = "\n\n".join(f"### {path}\n{fence(content)}" for path, content in code_context.items())
    return (
        "We are fixing the following issue in a repository.\n\n"
        f"--- BEGIN ISSUE ---\n{problem_statement.strip()}\n--- END ISSUE ---\n\n"
        "Relevant files, with their full content:\n\n"
        f"--- BEGIN FILES ---\n{files}\n--- END FILES ---\n\n"
        f"{FORMAT_INSTRUCTIONS}"
    )


def shuffled_files(code_context: Mapping[str, str], seed: int, instance_id: str) -> dict[str, str]:
    """`code_context` in the prompt's order: sorted by a hash of (seed, instance_id, path).

    Each path's key is an independent uniform draw, so every order is equally likely whatever
    the stored order was (changed files first); the same (seed, instance_id) gives the same
    order on any machine and Python (no dependence on PYTHONHASHSEED or on the stored order).
    """

    def key(path: str) -> bytes:
        return hashlib.sha256(f"{seed}\0{instance_id}\0{path}".encode()).digest()

    return {path: code_context[path] for path in sorted(code_context, key=key)}


def build_messages(instance: Instance, seed: int) -> list[dict[str, str]]:
    """Chat messages for one instance, its files in the order `seed` draws (shuffled_files).

    The one place a prompt is built from an Instance: the training loader, the SFT warm start
    (through its loader) and the evaluation call it with their own seed.
    """
    files = shuffled_files(instance.code_context, seed, instance.instance_id)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(instance.problem_statement, files)},
    ]


def encode_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat-templated prompt, ending with the assistant turn's opening."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, Mapping):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]
