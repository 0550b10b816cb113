"""The regression fallback's test selection (data/agentless/regression_tests.py): the repository's test
files that import an edited module, directly or through the project's own modules; for a
JavaScript repository through data/context/js_imports.py's reader."""

from __future__ import annotations

from data.agentless.regression_tests import is_test_file, regression_test_files
from data.agentless.repo_view import RepoView
from data.context.js_imports import imported_files, specifiers
from reward.execution.jsenv import is_js_test_file

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


JS_FILES = {
    "package.json": '{"name": "calc", "main": "lib/index.js"}',
    "lib/index.js": "module.exports = require('./math');\n",
    "lib/math/index.js": "const { add } = require('./add');\nexport * from './sub';\n",
    "lib/math/add.js": "exports.add = (a, b) => a + b;\n",
    "lib/math/sub.ts": "import type { N } from '../types';\nexport const sub = (a: N, b: N) => a - b;\n",
    "lib/types.ts": "export type N = number;\n",
    "lib/cli.mjs": "import fs from 'node:fs';\nconst m = await import('./math/add.js');\n",
    "test/support/helper.js": "module.exports = require('../../lib/math/add');\n",
    "test/add.test.js": "const { add } = require('../lib/math/add.js');\n",
    "test/package.test.js": "const calc = require('..');\n",
    "test/by-name.spec.ts": "import {\n  sub,\n} from 'calc/lib/math/sub.js';\n",
    "test/helper-only.test.js": "require('./support/helper');\n",
    "test/cli.test.mjs": "import '../lib/cli.mjs';\n",
}


def _js_view() -> RepoView:
    return RepoView(sorted(p for p in JS_FILES if p != "package.json"), JS_FILES.get)


def test_the_js_import_reader_finds_every_form_and_resolves_files_folders_and_the_own_name():
    source = (
        "import a from './a';\nimport './side';\nexport { b } from \"./b\";\n"
        "const c = require( './c' );\nconst d = import('./d');\nimport type {\n  E,\n} from './e';\n"
    )
    assert sorted(specifiers(source)) == ["./a", "./b", "./c", "./d", "./e", "./side"]
    files = sorted(p for p in JS_FILES if p != "package.json")
    found = lambda path: imported_files(JS_FILES[path], path, files, JS_FILES.get, "calc")  # noqa: E731
    assert found("lib/index.js") == {"lib/math/index.js"}  # a folder: its index
    assert found("lib/math/index.js") == {"lib/math/add.js", "lib/math/sub.ts"}  # export-from too
    assert found("lib/math/sub.ts") == {"lib/types.ts"}
    assert found("lib/cli.mjs") == {"lib/math/add.js"}  # node: packages are not the project's
    assert found("test/package.test.js") == {"lib/index.js"}  # '..': the package.json's main
    assert found("test/by-name.spec.ts") == {"lib/math/sub.ts"}  # its own name; .js names the .ts source


def test_js_tests_reach_an_edited_module_through_the_projects_modules_nearest_first():
    view = _js_view()
    select = lambda edited, **kw: regression_test_files(  # noqa: E731
        view, edited, language="javascript", is_test=is_js_test_file, **kw
    )
    # add.js: add.test.js directly; cli.test.mjs through cli.mjs; package.test.js through
    # math/index.js and lib/index.js; the helper is not followed (as Python's helpers).
    assert select(["lib/math/add.js"]) == ["test/add.test.js", "test/cli.test.mjs", "test/package.test.js"]
    assert select(["lib/types.ts"]) == ["test/by-name.spec.ts", "test/package.test.js"]
    assert select(["lib/math/add.js"], limit=1) == ["test/add.test.js"]
    assert select(["lib/new.js"]) == []
    # The Python reader reads no JavaScript.
    assert regression_test_files(view, ["lib/math/add.js"]) == []
