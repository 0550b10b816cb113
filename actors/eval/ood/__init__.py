"""Out-of-domain evaluation (`python -m actors.evaluate mode=ood suite=NAME`): the paper's
Table 3 suites, one file each, registered by name in `SUITES` (suite.py). Importing this
package registers every suite."""

from actors.eval.ood import code_suites, cruxeval, math_answers, mmlu  # noqa: F401 - importing registers them
from actors.eval.ood.suite import SUITES, Problem, Suite, Verdict

__all__ = ["SUITES", "Problem", "Suite", "Verdict"]
