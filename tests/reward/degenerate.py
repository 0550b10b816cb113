"""Answers that cost a reward worker far more than their size, for the tests and bench/reward_work.py.

- `degenerate_answer`: a well-formed SWE-RL answer of a few dozen KB whose edits are all legal:
  one edit adds `SEED_LINES` lines "x", `DOUBLINGS` edits each double them (search "x", replace
  "x\\nx": every line matches), which grows the file to about 56 million characters, just under
  the size guard (`reward.apply.MAX_CONTENT_CHARS`), then `rewrites` edits turn every "x" into
  "y" and back, each reading and writing the whole text. Without the work cap it took a minute of
  CPU and over a GB of memory.
- `estimate_defeating_answer`: one edit whose predicted diff is a long run of lines made of
  characters the oracle's diff lacks, ending with the oracle diff's own characters in reverse
  order: the pair estimate (`reward.similarity.work_units`) counts one pass over it, but every
  match SequenceMatcher finds is one character at the far end, so it recurses over nearly the
  whole long side once per character of the short one (hundreds of passes).
"""

from __future__ import annotations

DEGENERATE_CONTEXT = {"a.py": "def f():\n    return 1\n"}
DEGENERATE_ORACLE = {"a.py": "def f():\n    return 2\n"}
SEED_LINES = 850
DOUBLINGS = 15


def block(path: str, search: str, replace: str) -> str:
    return f"```python\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"


def degenerate_answer(rewrites: int = 300, char: str = "x") -> str:
    """`SEED_LINES` x 2^`DOUBLINGS` lines of `char` (~56e6 characters), rewritten `rewrites`
    times into the next code point and back (a wider `char` makes every copy wider in memory)."""
    other = chr(ord(char) + 1)
    blocks = [block("a.py", "    return 1", "    return 1" + f"\n{char}" * SEED_LINES)]
    blocks += [block("a.py", char, f"{char}\n{char}")] * DOUBLINGS
    blocks += [block("a.py", char, other), block("a.py", other, char)] * (rewrites // 2)
    return "<think>grow, then rewrite</think><solution>" + "".join(blocks) + "</solution>"


# The oracle's change: a short diff with many distinct characters (none of them in the filler).
DISTINCT = 250
ESTIMATE_CONTEXT = {"b.py": "k = 0\n"}
ESTIMATE_ORACLE = {"b.py": "k = 0\n" + "".join(f"{chr(0x100 + i)}\n" for i in range(DISTINCT))}


def estimate_defeating_answer(lines: int = 20_000) -> str:
    """A replacement of `lines` filler lines then the oracle's added characters, reversed."""
    filler = "\n".join("." * 30 for _ in range(lines))
    tail = "\n".join(chr(0x100 + i) for i in reversed(range(DISTINCT)))
    return (
        "<think>pad it out</think><solution>" + block("b.py", "k = 0", "k = 0\n" + filler + "\n" + tail) + "</solution>"
    )
