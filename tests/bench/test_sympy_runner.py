"""bench/sympy_runner.py reads sympy's `bin/test --verbose` console: every test's status, and the
tests whose line ends with their file's status, which a reader of lines ending " ok", " F" or
" E" does not see (the last test of each file: why SWE-bench's sympy labels leave them out)."""

from __future__ import annotations

from bench.sympy_runner import bin_test_outcomes, hidden_by_file_status

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
