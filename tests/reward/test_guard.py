"""reward/execution/guard.py's rules, path by path: which of a candidate's files the test run
never sees. The Python rules' effect on real runs is tested in test_forgery.py; here, values."""

from __future__ import annotations

import pytest

from reward.execution.guard import is_guarded

# path -> guarded even when the base commit has the file (created=False)
ALWAYS = (
    # Python, as before
    "conftest.py",
    "pkg/tests/conftest.py",
    "setup.cfg",
    "tests/test_api.py",
    "pkg/__pycache__/mod.cpython-311.pyc",
    # JavaScript/TypeScript runner and compiler configuration
    "jest.config.js",
    "packages/core/jest.config.ts",
    "vitest.config.mts",
    "vitest.workspace.ts",
    "vite.config.js",
    ".mocharc.yml",
    ".mocharc.json",
    "babel.config.cjs",
    ".babelrc",
    ".babelrc.js",
    "tsconfig.json",
    "packages/a/tsconfig.build.json",
    "jsconfig.json",
    ".swcrc",
    "karma.conf.js",
    "ava.config.mjs",
    # the manifest, lock and package-manager files, dependencies
    "package.json",
    "packages/a/package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    ".npmrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    ".pnp.cjs",
    ".yarn/releases/yarn-4.1.0.cjs",
    "node_modules/lodash/index.js",
    "src/node_modules/local/index.js",
    # the tests, their mocks and snapshots
    "src/util.test.js",
    "src/Button.spec.tsx",
    "lib/router.test.mjs",
    "test/app.router.js",
    "test/acceptance/auth.js",
    "tests/helpers/server.ts",
    "spec/parser.js",
    "src/__tests__/helpers.js",
    "src/__tests__/data.json",
    "src/__mocks__/fs.js",
    "src/__snapshots__/Button.test.tsx.snap",
    # set-up files
    "jest.setup.js",
    "vitest.setup.ts",
    "src/setupTests.ts",
    "test/setup.js",
    "test/helper.mjs",
)
# guarded only when the candidate creates them
CREATED_ONLY = ("tests/helpers.py", "json.py", "test/fixtures/payload.json", "src/testing/harness.ts")
# never guarded: plain source files of either language, and their data
NEVER = (
    "src/index.js",
    "lib/router.ts",
    "lib/application.js",
    "src/components/Button.tsx",
    "src/contest.js",
    "index.d.ts",
    "pkg/module.py",
    "README.md",
    "docs/config.md",
)


@pytest.mark.parametrize("path", ALWAYS)
def test_always_guarded(path):
    assert is_guarded(path, created=False) and is_guarded(path, created=True)


@pytest.mark.parametrize("path", CREATED_ONLY)
def test_guarded_only_when_created(path):
    assert not is_guarded(path, created=False) and is_guarded(path, created=True)


@pytest.mark.parametrize("path", NEVER)
def test_plain_sources_are_applied(path):
    assert not is_guarded(path, created=False) and not is_guarded(path, created=True)
