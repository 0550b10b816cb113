"""The run-time layers' tests meet their attacks behind the static screen.

reward/screen.py refuses, before anything runs, a candidate whose added code reaches for
frames, tracing, `mock.ANY`, `__module__ = 'datetime'`, the runner's internals and the like, so
most attacks these files write plainly never reach the layer they test (the canaries, the probe,
the guard, the sandbox). A forger who evades the screen (a name built at run time) meets those
layers with the same code: in these modules the runner's screen is off, and each test checks
its own layer. The screen's own tests are tests/reward/test_screen.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reward.execution import runner as runner_module

BEHIND_THE_SCREEN = frozenset(
    {
        "test_forgery",
        "test_always_equal",
        "test_js_runners",
        "test_django_runner",
        "test_containment",
        "test_escapes",
        "test_capabilities",
    }
)


@pytest.fixture(autouse=True)
def _behind_the_screen(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if Path(str(request.module.__file__)).stem in BEHIND_THE_SCREEN:
        monkeypatch.setattr(runner_module, "screen_patch", lambda patch: ())
