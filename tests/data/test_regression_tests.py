"""The regression fallback's test selection (data/agentless/regression_tests.py): the repository's test
files that import an edited module, directly or through the project's own modules."""

from __future__ import annotations

from data.agentless.regression_tests import is_test_file, regression_test_files
from data.agentless.repo_view import RepoView

FILES = {
    "pkg/__init__.py": "from .models import Model\nfrom . import utils\n",
    "pkg/models.py": "from pkg.utils import quote\n\nclass Model: ...\n",
    "pkg/utils.py": "def quote(s): return s\n",
    "pkg/cli.py": "import sys\n",
    "tests/__init__.py": "",
    "tests/helpers.py": "from pkg.models import Model\n",
    "tests/test_models.py": "from pkg.models import Model\n",
    "tests/test_package.py": "import pkg\n",
    "tests/test_cli.py": "from pkg import cli\n",
    "tests/test_helpers_only.py": "from tests.helpers import Model\n",
    "tests/conftest.py": "import pkg.utils\n",
}


def _view() -> RepoView:
    return RepoView(sorted(FILES), FILES.get)


def test_direct_importers_come_first_then_those_through_the_package():
    # models.py directly; test_package.py through pkg/__init__.py (one import step); test_cli.py
    # imports pkg.cli, which does not import models; helpers and conftest are not test files.
    assert regression_test_files(_view(), ["pkg/models.py"]) == ["tests/test_models.py", "tests/test_package.py"]
    # utils.py: imported by models.py and __init__.py (both one step away): a tie, by path.
    assert regression_test_files(_view(), ["pkg/utils.py"]) == ["tests/test_models.py", "tests/test_package.py"]
    assert regression_test_files(_view(), ["pkg/cli.py"]) == ["tests/test_cli.py"]


def test_the_limit_and_files_outside_the_tree():
    assert regression_test_files(_view(), ["pkg/utils.py"], limit=1) == ["tests/test_models.py"]
    assert regression_test_files(_view(), ["pkg/new_module.py", "README.md"]) == []
    assert is_test_file("a/test_x.py") and is_test_file("x_test.py")
    assert not is_test_file("tests/conftest.py") and not is_test_file("tests/helpers.py")
