"""What a JavaScript/TypeScript repository needs, read from its files (jsenv.py, jscommand.py):
pure decisions over small package.json / .nvmrc / workflow files the tests write. Nothing runs."""

from __future__ import annotations

import json

import pytest

from data.fixtures.synthetic import write_tree
from reward.execution import jsenv
from reward.execution.jscommand import detect_runner, js_command, split_shell
from reward.execution.jsenv import (
    is_javascript,
    js_candidates,
    js_test_files,
    lock_kind,
    lockfile_version,
    major_range,
    node_major,
    node_versions,
)


def package(**fields) -> str:
    return json.dumps({"name": "acme", "version": "1.0.0", **fields})


def tree(tmp_path, files):
    return write_tree(tmp_path, files)


# ---------------------------------------------------------------------------- Node versions


@pytest.mark.parametrize(
    ("text", "majors"),
    [
        (">=14", list(range(14, 25))),
        ("^18 || ^20", [18, 20]),
        (">= 16.0.0", list(range(16, 25))),
        ("14.x", [14]),
        ("*", list(range(10, 25))),
        (">= 0.10.0", list(range(10, 25))),  # express 4: every major here
        (">=14 <19", [14, 15, 16, 17, 18]),
        ("16 - 20", [16, 17, 18, 19, 20]),
        ("~16.13", [16]),
        (">12", list(range(13, 25))),  # npm: >12 is >=13.0.0
        ("<=12", [10, 11, 12]),
        ("^14.17.0 || >=16.0.0", [14, *range(16, 25)]),
        (">=18.0.0 <19.0.0 || >=20", [18, *range(20, 25)]),
    ],
)
def test_an_engines_range_admits_the_majors_some_version_of_which_satisfies_it(text, majors):
    admits = major_range(text)
    assert admits is not None
    assert [m for m in range(10, 25) if admits(m)] == majors


def test_an_unreadable_range_does_not_constrain():
    assert major_range("node 14 please") is None
    assert major_range(">=14 || whatever") is None


def test_node_major_reads_versions_codenames_and_aliases_as_of_the_date():
    assert node_major("v18.17.0", None) == 18 and node_major("'20.x'", None) == 20 and node_major("16", None) == 16
    assert node_major("lts/hydrogen", None) == 18 and node_major("lts/Iron", None) == 20
    assert node_major("lts/*", "2023-06-01") == 18  # 20 entered LTS in October 2023
    assert node_major("lts/*", "2023-11-01") == 20 and node_major("lts/-1", "2023-11-01") == 18
    assert node_major("node", "2022-05-01") == 18
    assert node_major("${{ matrix.node }}", None) is None and node_major("iojs", None) is None


def test_a_pinned_version_comes_first_then_the_engines_majors_its_ci_tests(tmp_path):
    snapshot = tree(
        tmp_path,
        {
            "package.json": package(engines={"node": ">=16"}),
            ".nvmrc": "v20.11.1\n",
            ".github/workflows/ci.yml": "jobs:\n  t:\n    strategy:\n      matrix:\n"
            "        node-version: [14.x, 16.x, 18.x, 20.x]\n    steps:\n"
            "      - uses: actions/setup-node@v4\n        with:\n          node-version: ${{ matrix.node-version }}\n",
        },
    )
    # 14: CI tests it but engines excludes it; 21 (odd, out by then) after the even ones.
    assert node_versions(snapshot, "2024-03-01T00:00:00Z") == ["20", "18", "16", "21", "19", "17"]


def test_a_major_released_after_the_commit_is_not_a_candidate_and_a_fresh_one_comes_late(tmp_path):
    snapshot = tree(tmp_path, {"package.json": package(engines={"node": ">=18"})})
    # 22 came out 2024-04-24: on 2024-04-01 not a candidate; on 2024-06-01 fewer than 90 days
    # old, after 20 and 18 (its packages' binaries lagged).
    assert node_versions(snapshot, "2024-04-01T00:00:00Z") == ["20", "18", "21", "19"]
    assert node_versions(snapshot, "2024-06-01T00:00:00Z") == ["20", "18", "21", "19", "22"]
    # A commit's local offset counts in UTC: 23:30 on the 23rd at -05:00 is the 24th.
    assert "22" in node_versions(snapshot, "2024-04-23T23:30:00-05:00")


def test_ci_lists_travis_and_multiline_items_are_read(tmp_path):
    snapshot = tree(
        tmp_path,
        {
            "package.json": package(),
            ".travis.yml": "language: node_js\nnode_js:\n  - '10'\n  - '12'\n  - 'node'\n",
            ".github/workflows/test.yml": "jobs:\n  t:\n    strategy:\n      matrix:\n"
            "        include:\n          - node: 8\n          - node: '14'\n",
        },
    )
    assert jsenv.tested_nodes(snapshot, "2020-09-01") == [14, 12, 10]  # 'node' = 14 then; 8 too old
    assert node_versions(snapshot, "2020-09-01T00:00:00Z")[:3] == ["14", "12", "10"]


def test_nothing_declared_the_newest_mature_lts_first_and_without_a_date_the_default(tmp_path):
    snapshot = tree(tmp_path, {"package.json": package()})
    assert node_versions(snapshot, "2022-12-01T00:00:00Z")[:4] == ["18", "16", "14", "12"]
    assert node_versions(snapshot, None)[0] == jsenv.DEFAULT_NODE
    # Nothing the range admits is out by the date: the newest even major then.
    narrow = tree(tmp_path / "n", {"package.json": package(engines={"node": ">=22"})})
    assert node_versions(narrow, "2021-01-01T00:00:00Z") == ["14"]


def test_volta_and_node_version_files_pin(tmp_path):
    volta = tree(tmp_path / "v", {"package.json": package(volta={"node": "18.19.0"})})
    assert node_versions(volta, "2024-01-01T00:00:00Z")[0] == "18"
    nv = tree(tmp_path / "n", {"package.json": package(), ".node-version": "# pinned\n16\n"})
    assert node_versions(nv, "2024-01-01T00:00:00Z")[0] == "16"
    asdf = tree(tmp_path / "a", {"package.json": package(), ".tool-versions": "python 3.11.4\nnodejs 14.16.0\n"})
    assert node_versions(asdf, "2022-09-13T00:00:00Z")[0] == "14"  # date-fns 2.29.3: not 18, the newest
    old = tree(tmp_path / "o", {"package.json": package(), ".nvmrc": "8\n"})  # too old: not a pin here
    assert node_versions(old, "2019-01-01T00:00:00Z")[0] == "10"


# ---------------------------------------------------------------------------- runner


def test_mocha_options_worth_passing_are_kept_and_the_rest_named_with_why(tmp_path):
    test = (
        "mocha --require test/support/env --reporter spec --bail --check-leaks --ui tdd -t 5000 test/ test/acceptance/"
    )
    snapshot = tree(tmp_path, {"package.json": package(scripts={"test": test}, devDependencies={"mocha": "^10"})})
    command = js_command(snapshot)
    assert command.runner == "mocha" and command.source == "scripts.test"
    assert command.args == ("--require", "test/support/env", "--check-leaks", "--ui", "tdd", "-t", "5000")
    assert command.paths == ("test", "test/acceptance")
    assert command.ignored == ("--bail: stops at the first failure",)  # the reporter: silently
    assert detect_runner(snapshot) == ("mocha", command.args)


def test_called_scripts_are_followed_through_launchers_and_extra_arguments(tmp_path):
    scripts = {
        "test": "npm run lint && npm run test:unit -- --coverage",
        "lint": "eslint .",
        "test:unit": "cross-env NODE_ENV=test NODE_OPTIONS=--experimental-vm-modules jest --config jest.unit.js --ci",
    }
    command = js_command(tree(tmp_path, {"package.json": package(scripts=scripts)}))
    assert command.runner == "jest" and command.source == "scripts.test:unit"
    assert command.args == ("--config", "jest.unit.js")
    assert command.node_options == ("--experimental-vm-modules",)
    assert command.before == ("eslint .",)
    assert command.ignored == ("--coverage: coverage: its thresholds can fail a run whose tests passed",)


def test_yarn_scripts_npx_and_a_wrapper_node_script(tmp_path):
    zod = {"test": "yarn test:ts-jest", "test:ts-jest": "npx jest --config ./configs/ts-jest.config.json"}
    assert detect_runner(tree(tmp_path / "z", {"package.json": package(scripts=zod)})) == (
        "jest",
        ("--config", "./configs/ts-jest.config.json"),
    )
    axios = {
        "test": "npm run test:eslint && npm run test:mocha && npm run test:karma",
        "test:eslint": "node bin/ssl_hotfix.js eslint lib/**/*.js",
        "test:mocha": "node bin/ssl_hotfix.js mocha test/unit/**/*.js --timeout 30000 --exit",
        "test:karma": "karma start karma.conf.cjs --single-run",
    }
    command = js_command(tree(tmp_path / "a", {"package.json": package(scripts=axios)}))
    assert (command.runner, command.args, command.paths) == (
        "mocha",
        ("--timeout", "30000", "--exit"),
        ("test/unit/**/*.js",),
    )
    assert command.before == ("node bin/ssl_hotfix.js eslint lib/**/*.js",)


def test_node_test_vitest_run_and_run_s_globs(tmp_path):
    node = {"test": "node --test --test-reporter spec --import tsx test/"}
    command = js_command(tree(tmp_path / "n", {"package.json": package(scripts=node)}))
    assert (command.runner, command.args, command.paths) == ("node-test", ("--import", "tsx"), ("test",))
    vit = {"test": "run-s test:*", "test:types": "tsc --noEmit", "test:unit": "vitest run --coverage -w=false src"}
    command = js_command(tree(tmp_path / "v", {"package.json": package(scripts=vit)}))
    assert (command.runner, command.paths) == ("vitest", ("src",))
    assert command.before == ("tsc --noEmit",)
    jest = {"test": "node --experimental-vm-modules node_modules/jest/bin/jest.js -i"}
    command = js_command(tree(tmp_path / "j", {"package.json": package(scripts=jest)}))
    assert (command.runner, command.node_options) == ("jest", ("--experimental-vm-modules",))


def test_pretest_and_a_subcommand_tool_are_steps_before_not_runners(tmp_path):
    scripts = {"pretest": "npm run build", "build": "bun run compile", "test": "npx -y vitest@1 run"}
    command = js_command(tree(tmp_path / "b", {"package.json": package(scripts=scripts)}))
    assert (command.runner, command.before) == ("vitest", ("bun run compile",))
    bun = tree(tmp_path / "t", {"package.json": package(scripts={"test": "bun test"}, devDependencies={"jest": "1"})})
    assert detect_runner(bun) is None and js_command(bun).ignored == (
        "bun test: bun test is not a runner the harness has",
    )


def test_no_runner_for_the_placeholder_and_for_a_runner_the_harness_lacks(tmp_path):
    placeholder = {"test": 'echo "Error: no test specified" && exit 1'}
    snapshot = tree(tmp_path / "p", {"package.json": package(scripts=placeholder, devDependencies={"jest": "29"})})
    assert detect_runner(snapshot) is None
    assert js_candidates(snapshot, "2024-01-01T00:00:00Z", "acme/p") == []
    # ava runs the suite: the mocha among the dependencies is another tool's.
    ava = tree(tmp_path / "a", {"package.json": package(scripts={"test": "xo && ava"}, devDependencies={"mocha": "1"})})
    assert detect_runner(ava) is None
    assert "ava is not a runner the harness has" in js_command(ava).ignored[0]
    # A type checker (dtslint) is not a runner: axios 0.27's mocha among its dependencies counts.
    axios = {"scripts": {"test": "grunt test && dtslint"}, "devDependencies": {"mocha": "1", "karma": "1"}}
    command = js_command(tree(tmp_path / "x", {"package.json": package(**axios)}))
    assert (command.runner, command.source) == ("mocha", "devDependencies")


def test_without_a_runner_in_the_scripts_the_configuration_then_the_dependencies_decide(tmp_path):
    vite = tree(
        tmp_path / "v",
        {
            "package.json": package(scripts={"test": "node run-tests.js"}),
            "vite.config.ts": "export default {\n  test: {}\n}\n",
        },
    )
    assert js_command(vite).runner == "vitest" and js_command(vite).source == "vite.config.ts"
    assert js_command(vite).ignored == ("node run-tests.js: not a test runner's command",)
    # An argument named like a runner is a path, not the runner.
    tsc = tree(tmp_path / "t", {"package.json": package(scripts={"test": "npx tsc -p test/mocha"})})
    assert detect_runner(tsc) is None
    plain_vite = tree(tmp_path / "pv", {"package.json": package(devDependencies={"mocha": "9"}), "vite.config.ts": "x"})
    assert js_command(plain_vite).source == "devDependencies"
    keyed = tree(tmp_path / "k", {"package.json": package(jest={"testEnvironment": "node"})})
    assert detect_runner(keyed) == ("jest", ())
    assert detect_runner(tree(tmp_path / "e", {"package.json": package()})) is None


def test_split_shell_keeps_quoted_separators_inside_an_argument():
    assert split_shell("mocha --grep 'a|b' && echo done > out.txt") == [["mocha", "--grep", "a|b"], ["echo", "done"]]
    assert split_shell("mocha 'open") == []


# ---------------------------------------------------------------------------- locks, language


def test_lock_kinds(tmp_path):
    def kind(files):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        return lock_kind(tree(root, {"package.json": package(), **files}))

    assert kind({"package-lock.json": '{"lockfileVersion": 3}'}) == "npm"
    assert kind({"yarn.lock": '# yarn lockfile v1\n\nfoo@^1:\n  version "1.0.0"\n'}) == "yarn"
    assert kind({"yarn.lock": '__metadata:\n  version: 6\n\n"foo@npm:^1":\n'}) == "yarn-berry"
    assert kind({"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}) == "pnpm"
    assert kind({}) is None
    # Two locks: package.json's packageManager decides, else npm's own.
    both = {"package-lock.json": "{}", "yarn.lock": "# yarn lockfile v1\n"}
    assert kind(both) == "npm"
    root = tree(tmp_path / "pm", {"package.json": package(packageManager="yarn@1.22.19"), **both})
    assert lock_kind(root) == "yarn"
    assert lockfile_version(tree(tmp_path / "v", {"package-lock.json": '{"lockfileVersion": 2}'})) == 2


def test_is_javascript(tmp_path):
    assert is_javascript(tree(tmp_path / "js", {"package.json": package()}))
    assert not is_javascript(tree(tmp_path / "py", {"package.json": package(), "pyproject.toml": ""}))
    assert not is_javascript(tree(tmp_path / "bad", {"package.json": "[1, 2]"}))
    assert not is_javascript(tree(tmp_path / "none", {"index.js": ""}))


def test_candidates_pair_each_node_version_with_the_runner(tmp_path):
    snapshot = tree(
        tmp_path,
        {
            "package.json": package(engines={"node": "^18 || ^20"}, scripts={"test": "jest --ci --config jest.json"}),
            "package-lock.json": '{"lockfileVersion": 3}',
        },
    )
    got = js_candidates(snapshot, "2024-05-01T12:00:00+02:00", "acme/lib")
    assert [fields["node"] for _, fields in got] == ["20", "18"]
    assert got[0][1] == {
        "snapshot": "git",
        "node": "20",
        "install": "lock",
        "runner": "jest",
        "runner_args": ["--config", "jest.json"],
        "exclude_newer": "2024-05-01T10:00:00Z",
    }
    assert "lockfileVersion 3" in got[0][0] and "scripts.test" in got[0][0]
    assert (
        len(js_candidates(tree(tmp_path / "m", {"package.json": package(scripts={"test": "mocha"})}), None, "a/b", 2))
        == 2
    )


# ---------------------------------------------------------------------------- test files


def test_js_test_files_keep_tests_and_leave_out_fixtures_helpers_and_declarations():
    paths = [
        "test/app.router.js",  # mocha: a test by its folder
        "src/__tests__/parse.ts",
        "src/parse.test.tsx",
        "lib/util.spec.mjs",
        "test/support/env.js",  # express's mocha --require
        "test/support/server.test.js",  # named as a test: kept
        "test/utils.js",  # express: tests lib/utils.js
        "test/unit/helpers/parseProtocol.js",  # axios: tests lib/helpers/parseProtocol.js
        "test/specs/__helpers.js",  # "_": a helper by convention
        "test/fixtures/app.test.js",  # a fixture a test loads
        "src/__mocks__/fs.js",
        "test/setup.ts",
        "test/jest.config.js",
        "test/types.d.ts",
        "test/data.json",
        "lib/router.js",
        "test/test_things.py",
    ]
    assert js_test_files(paths) == [
        "test/app.router.js",
        "src/__tests__/parse.ts",
        "src/parse.test.tsx",
        "lib/util.spec.mjs",
        "test/support/server.test.js",
        "test/utils.js",
        "test/unit/helpers/parseProtocol.js",
    ]
