"""bench/sympy_runner.py reads sympy's `bin/test --verbose` console: every test's status, and the
tests whose line ends with their file's status, which a reader of lines ending " ok", " F" or
" E" does not see (the last test of each file: why SWE-bench's sympy labels leave them out)."""

from __future__ import annotations

from bench.sympy_runner import bin_test_outcomes, differences, hidden_by_file_status

LOG = """\
============================= test process starts ==============================
sympy/tensor/array/tests/test_ndim_array.py[3]
test_array_negative_indices ok
test_issue_17851 f
test_issue_and_18715 E                                                    [FAIL]

sympy/core/tests/test_var.py[2]
test_var F
test_var_return ok                                                          [OK]

_______ sympy/tensor/array/tests/test_ndim_array.py:test_issue_and_18715 _______
ValueError: Only a tuple index is accepted
"""


def test_each_test_has_its_status_and_the_last_of_each_file_is_named():
    assert bin_test_outcomes(LOG) == {
        "test_array_negative_indices": "passed",
        "test_issue_17851": "xfailed",
        "test_issue_and_18715": "error",
        "test_var": "failed",
        "test_var_return": "passed",
    }
    assert hidden_by_file_status(LOG) == ["test_issue_and_18715", "test_var_return"]


def test_a_verdict_differs_only_where_a_test_passes_under_one_runner_alone():
    native = {"test_a": "passed", "test_b": "error", "test_c": "failed", "test_d": "passed"}
    harness = {"test_a": "passed", "test_b": "failed", "test_c": "passed"}
    assert differences(native, harness, ["test_a", "test_b", "test_c", "test_d"]) == {
        "labelled_differing": {"test_c": ["failed", "passed"], "test_d": ["passed", "missing"]},
        "labelled_failing_differently": {"test_b": ["error", "failed"]},
    }
