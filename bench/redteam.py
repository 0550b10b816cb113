"""The red team's figures: attempts per class of attack, and how many forged or escaped.

    python bench/redteam.py [--against REV]

Runs the adversarial tests (each test is one attempt: a hostile patch, answer, report or build
run through the real Runner, sandbox, reward kinds or pool) and prints, per class of
docs/security.md, the attempts and how many got through: a failed test is an attempt that
forged a verdict, reached the host or stalled the pool (the tests assert exactly that). With
`--against REV` the same attack files (not the unit tests of new modules) also run against the
harness of git revision REV (a temporary worktree), which shows how many each class forged
before the fix.

The last line reads `red team: N attempts, F forged or escaped`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ATTACKS = (  # also run against an older harness (--against)
    "tests/reward/test_escapes.py",
    "tests/reward/test_forgery.py",
    "tests/reward/test_containment.py",
    "tests/reward/test_env_build.py",
    "tests/actors/test_ood_forgery.py",  # the out-of-domain graders, through their public API
    "tests/reward/test_always_equal.py",  # always-equal values in passing tests (the recorder's probe)
    "tests/reward/test_env_leaks.py",  # the repository's own release, host paths in manifests
    "tests/reward/test_capabilities.py",  # capabilities refused by policy, the probe without trust, the labels
)
NEW_CODE = (
    "tests/data/test_paths.py",
    "tests/reward/test_report.py",
    "tests/actors/test_test_pool.py",
    "tests/reward/test_screen.py",  # the static screen: an attack per rule, through every place that judges
)
FILES = (*ATTACKS, *NEW_CODE)
# Files of which only these tests are attacks (the rest test other duties); each runs by its node id.
SELECTED = {
    "tests/reward/test_workspace.py": (
        "test_a_tree_past_a_session_limit_ends_the_episode_as_the_policys",
        "test_pid_1_answers_every_request_and_outlives_it",
        "test_a_folder_removed_whole_has_every_file_under_it_deleted",
        "test_a_name_a_diff_cannot_carry_is_left_out_and_named",
        "test_a_replayed_session_and_its_patch_make_the_same_tree",
    ),
    "tests/actors/test_agent_rollout.py": ("test_a_tree_past_a_session_limit_is_the_policys_not_the_infrastructures",),
    "tests/data/test_inject.py": (
        "test_a_bug_that_fails_only_by_chance_is_refused_as_flaky",
        "test_a_bug_failing_with_probability_0_7_per_process_is_rarely_kept",
    ),
    "tests/reward/test_django_runner.py": ("test_an_always_equal_value_under_the_unittest_runner_is_tampered",),
    "tests/reward/test_work_cap.py": (
        "test_an_unbounded_answer_rewriting_56_million_characters_is_rejected_by_the_work_cap",
        "test_an_unbounded_answer_in_wide_characters_is_rejected_by_the_work_cap",
        "test_an_unbounded_line_is_stopped_by_the_cpu_budget_and_the_rest_scores",
        "test_an_unbounded_line_of_the_cli_is_stopped_by_the_trainers_cpu_budget",
    ),
    "tests/actors/test_reward_pool.py": (
        "test_an_unbounded_batch_of_16_degenerate_answers_is_scored_and_the_step_goes_on",
    ),
}
# Tests in those files that are not attacks (clean input accepted, the pool's other duties).
NOT_ATTACKS = (
    "test_a_plain",
    "test_a_test_outcome",
    "test_canaries_sit",
    "test_an_honest",
    "test_a_session_that_ran",
    "test_a_killed_runner",
    "test_the_gold_patch_under_every_style",
    "test_the_gold_patch_resolves_under_every_style",
    "test_the_screen",
)
# Test function name (a prefix) -> class of attack (docs/security.md's numbering).
CLASSES = (
    ("test_a_patch_path", "1 paths in a diff"),
    ("test_a_rename", "2 rename and copy from outside"),
    ("test_a_copy", "2 rename and copy from outside"),
    ("test_a_patch_cannot_poison", "1 paths in a diff"),
    ("test_a_link_in_the_repository", "1 paths in a diff"),
    ("test_a_patch_naming", "1 paths in a diff"),
    ("test_a_path_that_is_not", "1 paths in a diff"),
    ("test_reads_writes", "1 paths in a diff"),
    ("test_the_sandbox_follows_no_link", "1 paths in a diff"),
    ("test_an_unsafe_answer_path", "1 paths in an answer"),
    ("test_a_nul_in_an_answer", "1 paths in an answer"),
    ("test_a_report_symlinked", "3 the report's place on the host"),
    ("test_a_flood", "3 the report's place on the host"),
    ("test_the_snapshot_is_built", "4 builds on the host"),
    ("test_a_declared_dependency", "4 builds on the host"),
    ("test_a_file_pytest_honours", "5 files pytest honours"),
    ("test_the_gold_patch_still", "5 files pytest honours"),
    ("test_a_stdlib_module", "5 files pytest honours"),
    ("test_a_report_forced", "6 the report from inside"),
    ("test_a_plugin_registered", "6 the report from inside"),
    ("test_a_report_written", "6 the report from inside"),
    ("test_forged_lines", "6 the report from inside"),
    ("test_test_files_come", "7 test files beside the test patch"),
    ("test_an_unreadable_report", "8 reports that break the pool"),
    ("test_a_stream_the_recorder", "8 reports that break the pool"),
    ("test_a_forged_report", "6 the report from inside"),
    ("test_a_report_past_its_cap", "8 reports that break the pool"),
    ("test_an_ood_answer_printing_the_pass_token", "9a ood: the pass token"),
    ("test_an_ood_answer_returning_an_always_equal", "9b ood: values equal to everything"),
    ("test_an_ood_answer_replacing_the_comparison", "9c ood: the comparison replaced"),
    ("test_an_ood_answer_reading_the_expected", "9d ood: the expected values read"),
    ("test_an_ood_answer_reading_cruxevals_want", "9d ood: the expected values read"),
    ("test_an_ood_answer_rebinding_cruxevals_f", "9e ood: CRUXEval's f rebound"),
    ("test_a_tree_past_a_session_limit", "10 agent-made infra failures"),
    ("test_pid_1_answers_every_request", "10 agent-made infra failures"),
    ("test_a_bug_that_fails_only_by_chance", "11 flaky bugs"),
    ("test_a_bug_failing_with_probability", "11 flaky bugs"),
    ("test_an_always_equal_value", "12 always-equal values"),
    ("test_a_folder_removed_whole", "13 session patch not its tree"),
    ("test_a_name_a_diff_cannot_carry", "13 session patch not its tree"),
    ("test_a_replayed_session", "13 session patch not its tree"),
    ("test_an_own_release", "leak: own release in the environment"),
    ("test_an_own_package", "leak: own release in the environment"),
    ("test_a_manifest_naming", "leak: host paths package managers read"),
    ("test_an_unbounded", "20 a reward that does not end"),
    ("test_a_stdlib_always_equal_value", "14 stdlib always-equal values"),
    ("test_the_tests_expected_value_read", "15 the expected value read from the test"),
    ("test_a_tracer_or_the_probe_switched_off", "16 tracers, the probe off, ctypes, gc, code"),
    ("test_a_capability_patching_the_tests_helpers", "17 the tests' helpers patched"),
    ("test_a_capability_in_a_search_replace_answer", "18 the same as SEARCH/REPLACE answers"),
    ("test_a_label_is_readable_nowhere", "19 labels readable inside the run"),
    ("test_a_screened", "21 static screen: capabilities no fix needs"),
    ("test_held_defences", "held: defences that held before"),
    ("", "held: defences that held before"),  # test_containment's and the rest
)
_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+?)::(\w+)")  # pytest -rA's summary


def run(root: Path) -> Counter[tuple[str, str]]:
    """(class, outcome) counts of the red-team tests in the tree `root`, run on its harness."""
    files = [str(root / f) for f in FILES if (root / f).exists()]
    for name, tests in SELECTED.items():  # those the tree has
        text = (root / name).read_text() if (root / name).exists() else ""
        files += [f"{root / name}::{t}" for t in tests if f"def {t}(" in text]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", f"--rootdir={root}", *files],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},  # the tree's modules before the venv's editable copy
    )
    counts: Counter[tuple[str, str]] = Counter()
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) != "SKIPPED":
            name = m.group(3)
            if name.startswith(NOT_ATTACKS):
                continue
            kind = next(label for prefix, label in CLASSES if name.startswith(prefix))
            counts[kind, "held" if m.group(1) == "PASSED" else "through"] += 1
    return counts


def _order(kind: str) -> tuple[int, str]:
    """Classes by their number (9a after 8, 10 after 9e), then the held ones."""
    number = re.match(r"\d+", kind)
    return (int(number.group()) if number else 1 << 30, kind)


def table(counts: Counter[tuple[str, str]], title: str) -> tuple[int, int]:
    print(f"{title}\n{'class':40} {'attempts':>8} {'forged or escaped':>18}")
    total = through = 0
    for kind in sorted({k for k, _ in counts}, key=_order):
        held, bad = counts[kind, "held"], counts[kind, "through"]
        print(f"{kind:40} {held + bad:8d} {bad:18d}")
        total, through = total + held + bad, through + bad
    return total, through


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="also run the tests against the harness of this git revision")
    args = parser.parse_args()
    if args.against:
        with tempfile.TemporaryDirectory() as tmp:
            old = Path(tmp) / "old"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old), args.against], check=True
            )
            try:
                for name in ATTACKS:  # the unit tests of new modules cannot run there
                    (old / name).write_text((ROOT / name).read_text())
                table(run(old), f"the harness of {args.against} (the same attacks):")
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
        print()
    total, through = table(run(ROOT), "this harness:")
    print(f"red team: {total} attempts, {through} forged or escaped")
    return 0 if through == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
