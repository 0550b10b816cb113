"""Small JavaScript repositories the tests write, and the offline npm they install with.

scripts/setup.sh fetches the runners of tests/reward/js_runners/package.json into the npm cache
.cache/npm once (network at set-up only); a test writes a repository whose package.json names
one of them, makes its package-lock.json from that cache offline (`resolved` URLs kept: this
machine's npmrc omits them, and an offline `npm ci` then finds each tarball by its integrity),
and the environment build runs `npm ci` offline from the same cache (`npm_config_offline`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from data.patching import make_patch
from data.schema import Instance
from reward.execution.environments import EnvSpec

REPO = Path(__file__).resolve().parents[2]
# SWE_RL_TEST_NPM_CACHE: a copy of it a user who cannot write the seeded one owns (the rootless runs)
NPM_CACHE = Path(os.environ.get("SWE_RL_TEST_NPM_CACHE") or REPO / ".cache" / "npm")
SEED = json.loads((Path(__file__).with_name("js_runners") / "package.json").read_text())["devDependencies"]
OFFLINE = {"npm_config_cache": str(NPM_CACHE), "npm_config_offline": "true"}


def skip_reason() -> str | None:
    """Why the JavaScript runner tests cannot run here, or None."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "no node/npm on PATH"
    if not (NPM_CACHE / ".seeded").is_file():
        return "the JavaScript runners are not in .cache/npm (scripts/setup.sh fetches them)"
    return None


@contextmanager
def offline_npm() -> Iterator[None]:
    """npm reads the seeded cache and nothing else while in this block."""
    saved = {k: os.environ.get(k) for k in OFFLINE}
    os.environ.update(OFFLINE)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def lock_for(package_json: str, extra: dict[str, str] | None = None) -> str:
    """package-lock.json for `package_json`, resolved from the seeded cache offline (`extra`:
    other files the resolution reads, a vendored tarball)."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "package.json").write_text(package_json)
        for rel, path in (extra or {}).items():
            Path(tmp, rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(tmp, rel))
        args = ["npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"]
        args.append("--omit-lockfile-registry-resolved=false")
        env = {**os.environ, **OFFLINE}
        out = subprocess.run(args, cwd=tmp, capture_output=True, text=True, env=env, timeout=120)
        if out.returncode != 0:
            pytest.fail(f"npm could not lock {package_json} offline: {out.stderr[-800:]}")
        return Path(tmp, "package-lock.json").read_text()


BUG = "function add(a, b) {\n  return a + Math.abs(b);\n}\nmodule.exports = { add };\n"
FIX = "function add(a, b) {\n  return a + b;\n}\nmodule.exports = { add };\n"


def suite(runner: str, fixed: bool) -> str:
    """lib/add.js's tests under `runner`: one that passes at the base commit; with `fixed`
    (the test patch's version), a describe block with one that fails there and one skipped."""
    it = "it" if runner == "mocha" else "test"
    if runner == "vitest":
        head = "import { test, expect, describe } from 'vitest';\nimport { add } from '../lib/add';\n"
        same = "expect({}).toBe({})"
    else:
        head = "const assert = require('assert');\nconst { add } = require('../lib/add');\n"
        if runner == "node-test":
            head = "const { test, describe } = require('node:test');\n" + head
        same = "assert.strictEqual({}, {})"
    body = f"{it}('adds', () => {{ {same.format('add(1, 2)', 3)}; }});\n"
    if fixed:
        negative = f"{it}('negative', () => {{ {same.format('add(1, -2)', -1)}; }});"
        skip = f"{it}.skip('later', () => {{}});"
        body += f"describe('signs', () => {{\n  {negative}\n  {skip}\n}});\n"
    return head + body


def instance(runner: str, files: dict[str, str] | None = None, **kw: object) -> Instance:
    """The add() bug in a repository run by `runner` (its package.json naming the runner, its
    lock made offline), with the gold patch and the test patch that adds its failing test."""
    test_file = "test/add.test.js"
    deps = {} if runner == "node-test" else {runner: SEED[runner]}
    package = json.dumps({"name": "calc", "version": "1.0.0", "private": True, "devDependencies": deps}, indent=2)
    tree = {"package.json": package + "\n", "lib/add.js": BUG, test_file: suite(runner, False), **(files or {})}
    if deps:
        tree["package-lock.json"] = lock_for(tree["package.json"])
    spec = EnvSpec(node="host", install="lock" if deps else "none", runner=runner)
    base: dict[str, object] = dict(
        instance_id=f"unit__calc-{runner}",
        repo="unit/calc",
        base_commit="0" * 40,
        problem_statement="add() ignores the sign of its second argument",
        patch=make_patch({"lib/add.js": BUG}, {"lib/add.js": FIX}),
        test_patch=make_patch({test_file: suite(runner, False)}, {test_file: suite(runner, True)}),
        code_context=tree,
        oracle_new_content={"lib/add.js": FIX},
        fail_to_pass=(f"{test_file}::signs > negative",),
        pass_to_pass=(f"{test_file}::adds",),
        environment=spec.to_json(),
    )
    base.update(kw)
    return Instance(**base)  # type: ignore[arg-type]
