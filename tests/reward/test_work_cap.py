"""Rule 3's work cap and the CPU budget per answer: a degenerate answer is rejected or stopped
in bounded work, real answers never come near either, and the reference agrees."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from data.demo import DEMO_SETS, load_demo_rows
from data.schema import Instance
from reward import oracle_answer, score_output
from reward.apply import MAX_APPLY_WORK, MAX_CONTENT_CHARS, WorkMeter, apply_edits, apply_path_edits
from reward.parse import Rejected, parse_output
from reward.spec import reference_new_content
from reward.workers import LimitedPool, process_cpu_s
from tests.reward.degenerate import (
    DEGENERATE_CONTEXT,
    DEGENERATE_ORACLE,
    DOUBLINGS,
    ESTIMATE_CONTEXT,
    ESTIMATE_ORACLE,
    SEED_LINES,
    block,
    degenerate_answer,
    estimate_defeating_answer,
)

ROOT = Path(__file__).resolve().parents[2]


def answer(*blocks: str) -> str:
    return "<think>t</think><solution>" + "".join(blocks) + "</solution>"


def test_each_edit_is_charged_the_text_before_and_after_it() -> None:
    context = {"a.py": "x\ny\n", "b.py": "z\n"}
    edits = parse_output(answer(block("a.py", "x", "xx"), block("a.py", "y", ""), block("b.py", "z", "w")))
    # The text is newline + content: a.py 5 -> 6 -> 5 characters, b.py 3 -> 3.
    assert apply_edits(context, edits).work == (5 + 6) + (6 + 5) + (3 + 3)


def test_the_cap_is_exclusive_and_the_reference_rejects_at_the_same_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    output = answer(block("a.py", "x", "x\nx"), block("a.py", "x", "y"), block("b.py", "", "new"))
    context = {"a.py": "x\n" * 100}
    work = apply_edits(context, parse_output(output)).work
    assert apply_edits(context, parse_output(output), max_work=work).work == work
    assert work == (201 + 401) + (401 + 401) + (1 + 4)
    with pytest.raises(
        Rejected, match=r"^work: edit 1 of b.py would bring .* past 1,408 \(reward.apply.MAX_APPLY_WORK\)"
    ):
        apply_edits(context, parse_output(output), max_work=work - 1)
    for cap, accepted in ((work, True), (work - 1, False)):
        monkeypatch.setattr("reward.spec.MAX_APPLY_WORK", cap)
        assert (reference_new_content(context, output) is not None) is accepted


@pytest.mark.timeout(120)
def test_an_unbounded_answer_rewriting_56_million_characters_is_rejected_by_the_work_cap() -> None:
    # Without the cap: 67 s of CPU and 1.6 GB. The edits are all legal, the file stays under
    # the size guard; only their total work is out of bounds.
    output = degenerate_answer(rewrites=300)
    assert len(output) < 24_000 and SEED_LINES * 2**DOUBLINGS * 2 < MAX_CONTENT_CHARS
    result = score_output(DEGENERATE_CONTEXT, DEGENERATE_ORACLE, output, max_pair_seconds=10.0)
    assert (result.reward, result.format_ok, result.timed_out) == (-1.0, True, False)
    # Rejected at the edit that would pass the cap: the growth (16 edits) and 8 rewrites ran.
    assert result.error.startswith("work: edit 25 of a.py would bring the characters read and written")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("char", ["\u0101", "\U0001d465"], ids=["two-byte", "four-byte"])
def test_an_unbounded_answer_in_wide_characters_is_rejected_by_the_work_cap(char: str) -> None:
    # Wider characters cost more per character (twice, four times the bytes): the cap, counted
    # in characters, stops them at the same edit.
    output = degenerate_answer(rewrites=300, char=char)
    result = score_output(DEGENERATE_CONTEXT, DEGENERATE_ORACLE, output, max_pair_seconds=10.0)
    assert (result.reward, result.error.split(" would")[0]) == (-1.0, "work: edit 25 of a.py")


def test_an_agent_action_gets_the_cap_for_its_own_edits(monkeypatch: pytest.MonkeyPatch) -> None:
    # actors/agent/episode.py applies one action's edits without a meter: a fresh one each time.
    assert WorkMeter().cap == MAX_APPLY_WORK
    monkeypatch.setattr("reward.apply.WorkMeter", lambda: WorkMeter(cap=10))
    assert apply_path_edits("a.py", "x\n", [("x", "y")], MAX_CONTENT_CHARS) == "y\n"  # 3 + 3
    assert apply_path_edits("a.py", "x\n", [("x", "y")], MAX_CONTENT_CHARS) == "y\n"  # not the last call's
    with pytest.raises(Rejected, match="^work: edit 2 of a.py"):
        apply_path_edits("a.py", "x\n", [("x", "y"), ("y", "x")], MAX_CONTENT_CHARS)


def test_real_answers_are_three_orders_of_magnitude_under_the_cap() -> None:
    # The demo sets' oracle answers here; bench/reward_work.py measures SWE-bench Lite's
    # (docs/benchmarks.md: the largest of 415 real answers read and wrote 1.2e6 characters).
    works = []
    for name in DEMO_SETS:
        for row in load_demo_rows(name):
            inst = Instance.from_row(row)
            output = oracle_answer(inst.code_context, inst.oracle_new_content)
            works.append(apply_edits(inst.code_context, parse_output(output)).work)
    assert len(works) >= 20 and 0 < max(works) * 1000 < MAX_APPLY_WORK


def _burn(seconds: float) -> float:
    start = process_cpu_s()
    while process_cpu_s() - start < seconds:
        pass
    return seconds


@pytest.mark.timeout(120)
def test_an_unbounded_line_is_stopped_by_the_cpu_budget_and_the_rest_scores() -> None:
    # No wall clock: only the kernel's CPU limit can end the 60 s item, even in a worker that
    # inherited SIGXCPU ignored (cpu_limit puts the default action back).
    previous = signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    try:
        pool = LimitedPool(_burn, workers=1, timeout_s=None, cpu_s=1.0)
    finally:
        signal.signal(signal.SIGXCPU, previous)
    try:
        out = list(pool.map([0.0, 60.0, 0.2], on_limit=lambda item, why: f"{item} {why}"))
    finally:
        pool.close()
    assert out == [0.0, "60.0 used more than 1 s of CPU", 0.2] and pool.timed_out == 1


@pytest.mark.timeout(180)
def test_an_unbounded_line_of_the_cli_is_stopped_by_the_trainers_cpu_budget(tmp_path: Path) -> None:
    # The estimate-defeating answer passes the pair cap of 0.5 s (its estimate is 0.43 s) and
    # then takes about 10 s of CPU; the CLI gives it 0.5 x reward.answer_cpu_factor (3) = 1.5 s.
    lines = [
        {"id": "hostile", "code_context": ESTIMATE_CONTEXT, "oracle_new_content": ESTIMATE_ORACLE,
         "output": estimate_defeating_answer()},
        {"id": "fine", "code_context": DEGENERATE_CONTEXT, "oracle_new_content": DEGENERATE_ORACLE,
         "output": answer(block("a.py", "    return 1", "    return 2"))},
    ]  # fmt: skip
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    command = [sys.executable, "-m", "reward.score", "--input", str(src), "--output", str(out)]
    proc = subprocess.run([*command, "--max-pair-seconds", "0.5", "--line-timeout-s", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=170, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records == [
        {"id": "hostile", "reward": 0.0, "error": "timeout: scoring the line used more than 1.5 s of CPU"},
        {"id": "fine", "reward": 1.0, "error": None},
    ]
