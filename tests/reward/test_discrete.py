"""reward.kind=discrete (reward/kinds/rule.py): the paper's section 3.6 ablation, -1 / 0 / 1."""

from __future__ import annotations

from conf.config import RewardConfig
from data.patching import files_patch
from data.schema import Instance
from reward import oracle_answer
from reward.core import exact_match
from reward.kinds import make_reward

CONTEXT = {"calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"}
ORACLE = {"calc.py": CONTEXT["calc.py"].replace("a - b", "a + b")}


def _answer(*edits: tuple[str, str]) -> str:
    """A well-formed answer with one SEARCH/REPLACE block per (search, replace) on calc.py."""
    blocks = "".join(
        f"```python\n### calc.py\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"
        for search, replace in edits
    )
    return f"<think>\nfix it\n</think>\n<solution>\n{blocks}</solution>"


def test_discrete_is_one_only_for_the_oracles_exact_change():
    kind = make_reward(RewardConfig(kind="discrete"))
    inst = Instance(
        instance_id="t__calc-1",
        repo="t/calc",
        base_commit="0" * 40,
        problem_statement="add subtracts",
        code_context=CONTEXT,
        oracle_new_content=ORACLE,
        patch=files_patch(CONTEXT, ORACLE, set()),
        test_patch="",
    )
    state = kind.prepare(inst)
    exact = oracle_answer(CONTEXT, ORACLE)
    near = _answer(("    return a - b", "    return b + a"))  # right, but not the oracle's bytes
    extra = _answer(("    return a - b", "    return a + b"), ("    return a * b", "    return a*b"))
    results = [kind.score(state, text) for text in (exact, near, "no tags at all", extra)]
    assert [r.reward for r in results] == [1.0, 0.0, -1.0, 0.0]
    assert results[1].error == "not the oracle's change" and results[2].format_ok is False
    # The similarity kind gives the near miss partial credit; discrete gives none.
    assert 0.0 < make_reward(RewardConfig()).score(make_reward(RewardConfig()).prepare(inst), near).reward < 1.0
    # An agent's final patch: the oracle's patch is exact, another one is not.
    other = files_patch(CONTEXT, {"calc.py": CONTEXT["calc.py"].replace("a - b", "b + a")}, set())
    assert [r.reward for r in kind.score_patches([(inst, inst.patch), (inst, other), (inst, "")])] == [1.0, 0.0, 0.0]


def test_exact_match_compares_the_changed_files_byte_for_byte():
    trailing = _answer(("    return a - b", "    return a + b "))
    assert exact_match(CONTEXT, ORACLE, trailing).reward == 0.0
    assert exact_match(CONTEXT, ORACLE, _answer(("    return a - b", "    return a + b"))).reward == 1.0
