"""conf/progress.py: plain lines with a rate and an ETA off a terminal, a tqdm bar on one."""

import io
import math

import pytest

from conf.progress import Progress, duration_text, rate_text


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_every_interval_with_rate_and_eta():
    clock, lines = FakeClock(), []
    with Progress("tests", "validation runs", 10, every_s=30, emit=lines.append, tty=False, clock=clock) as p:
        for _ in range(4):
            clock.now += 10  # one run every 10 s: 6/min
            p.update()
        # 40 s in, 4 done: one line at 30 s (3 done), none since.
        assert lines == ["[tests] 3/10 validation runs, 6.0/min, eta 70 s"]
        assert p.rate() == pytest.approx(0.1)
        assert p.eta_s() == pytest.approx(60.0)
        for _ in range(6):
            clock.now += 10
            p.update()
    # Every 30 s, and the last item always (close() does not repeat it).
    assert lines[1:] == [
        "[tests] 6/10 validation runs, 6.0/min, eta 40 s",
        "[tests] 9/10 validation runs, 6.0/min, eta 10 s",
        "[tests] 10/10 validation runs, 6.0/min, eta 0 s",
    ]


def test_unknown_total_has_a_count_a_rate_and_a_note_but_no_eta():
    clock, lines = FakeClock(), []
    with Progress("build", "candidates", None, every_s=5, emit=lines.append, tty=False, clock=clock) as p:
        clock.now += 2
        p.update(50, note="7 kept")
    assert math.isnan(p.eta_s())
    assert lines == ["[build] 50 candidates, 25.0/s, 7 kept"]  # the closing line only


def test_nothing_done_yet_has_an_unknown_eta():
    p = Progress("sft", "steps", 8, emit=lambda _: None, tty=False, clock=FakeClock())
    assert p.eta_s() == math.inf and duration_text(p.eta_s()) == "?"


def test_a_terminal_gets_a_bar_and_no_plain_lines(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")  # conf/logs.py sets it; the bar must show anyway
    stream, lines = io.StringIO(), []
    with Progress("sft", "steps", 4, emit=lines.append, stream=stream, tty=True) as p:
        for _ in range(4):
            p.update(note="loss 0.5000")
    assert lines == []
    shown = stream.getvalue()
    assert "[sft] steps" in shown and "4/4" in shown and "loss 0.5000" in shown


def test_the_terminal_is_detected_from_the_stream():
    lines = []
    Progress("eval", "instances", 1, emit=lines.append, stream=io.StringIO()).update()  # StringIO is no tty
    assert lines == ["[eval] 1/1 instances, " + lines[0].split(", ", 1)[1]]


@pytest.mark.parametrize(
    "seconds, text", [(45, "45 s"), (89.4, "89 s"), (600, "10 min"), (7200, "2.0 h"), (math.nan, "?")]
)
def test_durations(seconds, text):
    assert duration_text(seconds) == text


def test_rates_switch_to_per_minute_below_one_a_second():
    assert (rate_text(2.5), rate_text(0.05)) == ("2.5/s", "3.0/min")
