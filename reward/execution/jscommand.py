"""A JavaScript/TypeScript repository's own test command: which runner runs its suite and the
options the harness may pass on to it. Read from its files, never run (testcommand.py is the
pytest analogue).

Where the command is read, first found wins:

    scripts     package.json's `scripts.test`, with the scripts it calls followed (`npm run
                test:unit`, `yarn test:ts-jest`, `run-s test:*`; arguments after `--` go to the
                called script's last command), its shell parts (`&&`, `;`, `|`) in order: the
                first part that starts a runner the harness has ("jest", "vitest", "mocha",
                "node-test": `node --test`), through the launchers that only start it (`npx`,
                `cross-env`, `nyc`, `c8`, `node wrapper.js mocha`, `node node_modules/.bin/jest`).
                The parts before it, and `pretest`'s, are kept as `before` (a build, a linter:
                never run here); a later runner part is noted in `ignored`.
    config      no runner in the scripts (none, or an opaque `node test.js`): the runner's own
                configuration file (jest.config.*, package.json's "jest", vitest.config.*,
                vite.config.* with a `test:` section, .mocharc.*, test/mocha.opts), then the
                runner among devDependencies / dependencies.
    none        `scripts.test` is npm's placeholder (`echo "Error: no test specified" && exit 1`),
                or the scripts start only runners the harness does not have (ava, tap, karma,
                `bun test`...) and no configuration file names one (a runner among the
                dependencies is then another tool's): no command (runner None).

Options, per runner (OPTIONS): passed on are those that make the suite run as its maintainers
run it (mocha's --require, --ui, --timeout, --recursive, --exit; jest's --config, --env; vitest's
--config, --environment; node's --import, --experimental-* flags); left out, each with why, are
those the harness sets itself or that only change the console (reporters, colours), those that
cut a run short (--bail), rerun, watch or select by git, coverage (its thresholds fail a run whose
tests passed), concurrency (the harness decides), snapshot updates (a failing snapshot would pass)
and positive name filters (they would deselect the harness's canaries too). An option unknown to
the table is left out. Node's own flags set for jest or vitest (`NODE_OPTIONS=--experimental-vm-
modules jest`) are kept apart in `node_options`: the runner's command line cannot carry them.

Positional arguments are `paths`: files, folders or globs as written (mocha's `test/unit/**/*.js`,
jest's path patterns, vitest's filters). npm runs a script with `sh`, which expands an unquoted
glob itself, `**` as `*` (axios's matches test/unit/*/*.js); quoted, mocha expands it recursively.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNNER_NAMES = ("jest", "vitest", "mocha", "node-test")
# Executables that are a runner the harness has, by their command name.
RUNNER_BINS = {"jest": "jest", "vitest": "vitest", "mocha": "mocha", "_mocha": "mocha", "ts-mocha": "mocha"}
# Runner executables inside node_modules, as `node <path>` starts them.
_BIN_PATH = re.compile(r"node_modules/(?:\.bin/(jest|vitest|_?mocha)|(jest|vitest|mocha)/bin/\w+(?:\.m?js)?)$")
# Test runners the harness does not have: their command is not a suite it can run.
OTHER_RUNNERS = frozenset(
    {"ava", "tap", "tape", "karma", "jasmine", "lab", "uvu", "qunit", "playwright", "cypress", "borp", "zora"}
    | {"testem", "brittle", "web-test-runner", "wtr"}
)
# Tools that are such a runner only through their `test` subcommand (`bun test`, not `bun run x`).
OTHER_BY_SUBCOMMAND = frozenset({"bun", "deno", "react-scripts", "craco"})
# Commands that only start the next word (their own options skipped): the runner may follow.
LAUNCHERS = frozenset({"npx", "nyc", "c8", "cross-env", "cross-env-shell", "env", "dotenv", "time", "istanbul"})
# Commands that call another script of package.json.
_SCRIPT_CALL = re.compile(r"^(?:npm|yarn|pnpm|bun)$")
PLACEHOLDER = "no test specified"  # npm init's scripts.test
MAX_DEPTH = 6  # scripts calling scripts


@dataclass(frozen=True)
class Option:
    takes_value: bool
    why: str | None = None  # None: passed on; "": left out without a word (console only)


def _opts(takes: bool, why: str | None, *names: str) -> dict[str, Option]:
    return dict.fromkeys(names, Option(takes, why))


_CONCURRENCY = "the harness decides concurrency"
_COVERAGE = "coverage: its thresholds can fail a run whose tests passed"
_BAIL = "stops at the first failure"
_WATCH = "watches files instead of running once"
_CANARIES = "a positive name filter would deselect the harness's canaries too"
_SNAPSHOTS = "rewrites snapshots: a failing snapshot test would pass"
_CHANGED = "selects tests by git changes"
_ROOT = "moves the runner's root"
_RETRIES = "reruns failing tests: a flaky failure would read as passing"

OPTIONS: dict[str, dict[str, Option]] = {
    "mocha": {
        **_opts(True, None, "--require", "-r", "--ui", "-u", "--timeout", "-t", "--file", "--extension"),
        **_opts(True, None, "--config", "--opts", "--compilers", "--globals", "--loader", "--import"),
        **_opts(True, None, "--node-option", "-n", "--ignore", "--exclude"),
        **_opts(False, None, "--recursive", "--exit", "--check-leaks", "--delay", "--async-only", "-A", "--sort"),
        **_opts(False, None, "--no-timeouts", "--no-config", "--no-package", "--no-opts"),
        **_opts(True, "", "--reporter", "-R", "--reporter-option", "--reporter-options", "-O", "--slow", "-s"),
        **_opts(False, "", "--colors", "-c", "--no-colors", "-C", "--full-trace", "--inline-diffs", "--diff"),
        **_opts(False, "", "--no-diff", "--growl"),
        **_opts(False, _BAIL, "--bail", "-b"),
        **_opts(False, _WATCH, "--watch", "-w"),
        **_opts(True, _WATCH, "--watch-files", "--watch-ignore"),
        **_opts(False, _CONCURRENCY, "--parallel", "-p"),
        **_opts(True, _CONCURRENCY, "--jobs", "-j"),
        **_opts(True, _CANARIES, "--grep", "-g", "--fgrep", "-f"),
        **_opts(False, "with a filter, deselects tests", "--invert", "-i"),
        **_opts(True, _RETRIES, "--retries"),
        **_opts(False, "turns a pending test into a failure of the run", "--forbid-pending"),
        **_opts(False, "", "--forbid-only"),
    },
    "jest": {
        **_opts(True, None, "--config", "-c", "--env", "--testEnvironment", "--testTimeout", "--setupFiles"),
        **_opts(True, None, "--setupFilesAfterEnv", "--testPathIgnorePatterns", "--modulePathIgnorePatterns"),
        **_opts(True, None, "--roots", "--testMatch", "--testRegex", "--selectProjects", "--projects"),
        **_opts(False, None, "--forceExit", "--passWithNoTests", "--detectLeaks", "--injectGlobals"),
        **_opts(True, "", "--reporters", "--outputFile", "--json-output-file"),
        **_opts(False, "", "--verbose", "--silent", "--colors", "--no-colors", "--json", "--ci", "--no-cache"),
        **_opts(False, "", "--cache", "--logHeapUsage", "--detectOpenHandles", "--useStderr", "--no-watchman"),
        **_opts(False, "", "--runTestsByPath", "--notify", "--errorOnDeprecated", "--expand", "-e"),
        **_opts(False, _COVERAGE, "--coverage", "--collectCoverage"),
        **_opts(True, _COVERAGE, "--coverageReporters", "--collectCoverageFrom", "--coverageDirectory"),
        **_opts(True, _COVERAGE, "--coverageProvider", "--coverageThreshold"),
        **_opts(False, _WATCH, "--watch", "--watchAll"),
        **_opts(False, _BAIL, "--bail", "-b"),
        **_opts(False, _CONCURRENCY, "--runInBand", "-i", "--workerThreads"),
        **_opts(True, _CONCURRENCY, "--maxWorkers", "-w", "--maxConcurrency"),
        **_opts(True, _CANARIES, "--testNamePattern", "-t"),
        **_opts(False, _SNAPSHOTS, "--updateSnapshot", "-u"),
        **_opts(False, _CHANGED, "--onlyChanged", "-o", "--lastCommit", "--onlyFailures", "-f"),
        **_opts(True, _CHANGED, "--changedSince", "--findRelatedTests"),
        **_opts(True, _ROOT, "--rootDir"),
        **_opts(True, "runs a part of the suite", "--shard"),
        **_opts(False, "reorders tests", "--randomize"),
        **_opts(True, "reorders tests", "--seed"),
    },
    "vitest": {
        **_opts(True, None, "--config", "-c", "--environment", "--dir", "--pool", "--testTimeout", "--hookTimeout"),
        **_opts(True, None, "--exclude", "--project", "--mode", "--setupFiles"),
        **_opts(False, None, "--globals", "--dom", "--passWithNoTests", "--isolate", "--no-isolate"),
        **_opts(False, "", "--run", "--silent", "--hideSkippedTests", "--color", "--no-color", "--allowOnly"),
        **_opts(True, "", "--reporter", "--outputFile"),
        **_opts(False, _COVERAGE, "--coverage"),
        **_opts(False, _WATCH, "--watch", "-w"),
        **_opts(True, _BAIL, "--bail"),
        **_opts(False, _CONCURRENCY, "--threads", "--no-threads", "--no-file-parallelism", "--fileParallelism"),
        **_opts(True, _CONCURRENCY, "--maxWorkers", "--minWorkers", "--maxThreads", "--minThreads"),
        **_opts(True, _CANARIES, "--testNamePattern", "-t"),
        **_opts(False, _SNAPSHOTS, "--update", "-u"),
        **_opts(False, _CHANGED, "--changed"),
        **_opts(True, _ROOT, "--root", "-r"),
        **_opts(False, "runs the type checker, not the tests", "--typecheck"),
        **_opts(False, "runs in a browser", "--browser"),
        **_opts(True, "runs a part of the suite", "--shard"),
        **_opts(True, "reruns failing tests: a flaky failure would read as passing", "--retry"),
    },
    "node-test": {
        **_opts(True, None, "--require", "-r", "--import", "--loader", "--experimental-loader", "--env-file"),
        **_opts(True, None, "--test-timeout", "--test-skip-pattern", "--conditions", "-C"),
        **_opts(False, None, "--test-force-exit", "--enable-source-maps", "--no-warnings"),
        **_opts(True, "", "--test-reporter", "--test-reporter-destination"),
        **_opts(True, _CONCURRENCY, "--test-concurrency"),
        **_opts(False, _COVERAGE, "--experimental-test-coverage"),
        **_opts(False, _WATCH, "--watch"),
        **_opts(True, _CANARIES, "--test-name-pattern"),
        **_opts(False, "runs only the tests marked `only`", "--test-only"),
        **_opts(False, _SNAPSHOTS, "--test-update-snapshots"),
        **_opts(True, "runs a part of the suite", "--test-shard"),
    },
}
# Node's own flags (mocha forwards them to node; for node --test they are node's): passed on.
NODE_FLAG = re.compile(
    r"^--(experimental-[\w-]+|no-experimental-[\w-]+|no-warnings|no-deprecation|throw-deprecation|trace-warnings"
    r"|trace-deprecation|expose-gc|harmony[\w-]*|preserve-symlinks|enable-source-maps|max-old-space-size|stack-size"
    r"|unhandled-rejections|input-type|conditions|openssl-legacy-provider|disable-warning)(=.*)?$"
)
# A vitest word that is its subcommand, not a filter.
VITEST_COMMANDS = frozenset({"run", "watch", "dev", "related"})


@dataclass(frozen=True)
class JsCommand:
    source: str = ""  # where it was read ("scripts.test", "scripts.test:unit", "jest.config.js", "devDependencies")
    runner: str | None = None  # one of RUNNER_NAMES; None: nothing the harness can run
    args: tuple[str, ...] = ()  # options passed on
    paths: tuple[str, ...] = ()  # its selection of tests, as written (files, folders, globs); () = the runner's default
    ignored: tuple[str, ...] = ()  # "option: why", each left out
    node_options: tuple[str, ...] = ()  # Node's flags the command sets for a jest / vitest run
    before: tuple[str, ...] = ()  # commands the script runs before the runner (a build, a linter), never run here


def js_command(snapshot: Path) -> JsCommand:
    """The repository's test command (module docstring)."""
    package = package_json(snapshot)
    scripts = package.get("scripts")
    scripts = {k: v for k, v in scripts.items() if isinstance(v, str)} if isinstance(scripts, dict) else {}
    test = scripts.get("test")
    if test is not None and PLACEHOLDER in test:
        return JsCommand("scripts.test", ignored=(f"scripts.test: npm's placeholder ({test.strip()})",))
    found, ignored = _from_scripts(scripts) if test is not None else (None, [])
    if found is not None:
        return found
    # A runner the harness has not (karma, ava) runs the suite: a runner among the dependencies
    # is another tool's, not the suite's; a configuration file still says the suite is its.
    other = any("is not a runner the harness has" in why for why in ignored)
    source, runner = _from_config(snapshot, package, dependencies=not other)
    if runner is None:
        return JsCommand("scripts.test" if test is not None else "", ignored=tuple(ignored))
    return JsCommand(source, runner, ignored=tuple(ignored))


def detect_runner(snapshot: Path) -> tuple[str, tuple[str, ...]] | None:
    """(runner, options passed on) of the repository's test command, None when nothing runs its
    tests (js_command says why)."""
    command = js_command(snapshot)
    return (command.runner, command.args) if command.runner is not None else None


def package_json(snapshot: Path) -> dict[str, Any]:
    """The root package.json as a dict; {} when absent or not a JSON object."""
    path = snapshot / "package.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _from_scripts(scripts: dict[str, str]) -> tuple[JsCommand | None, list[str]]:
    """The first runner part of scripts.test (followed), or None and why each part was not one."""
    before: list[str] = []
    ignored: list[str] = []
    found: JsCommand | None = None
    # npm runs `pretest` first: a build or a linter, never the suite.
    before += [" ".join(words) for _, words in _parts(scripts, "pretest", [], 0, set())]
    for source, words in _parts(scripts, "test", [], 0, set()):
        text = " ".join(words)
        kind, runner, argv, node_options = _classify(words)
        if found is not None:
            if kind == "runner":
                ignored.append(f"{text}: a second runner command, not run")
            continue
        if kind == "runner":
            assert runner is not None
            args, paths, why = vet(runner, argv)
            found = JsCommand(f"scripts.{source}", runner, tuple(args), tuple(paths), (), tuple(node_options))
            ignored += why
        elif kind == "other-runner":
            ignored.append(f"{text}: {runner} is not a runner the harness has")
        else:
            before.append(text)
    if found is None:  # each command said why it is none
        return None, ignored + [f"{text}: not a test runner's command" for text in before]
    return JsCommand(
        found.source, found.runner, found.args, found.paths, tuple(ignored), found.node_options, tuple(before)
    ), []


def _parts(
    scripts: dict[str, str], name: str, extra: list[str], depth: int, seen: set[str]
) -> list[tuple[str, list[str]]]:
    """(script name, words) of each shell command script `name` runs, the scripts it calls
    expanded in place; `extra`: arguments appended to its last command (`npm run x -- --y`)."""
    if name not in scripts or name in seen or depth > MAX_DEPTH:
        return []
    seen = seen | {name}
    out: list[tuple[str, list[str]]] = []
    commands = split_shell(scripts[name])
    if extra and commands:
        commands[-1] = commands[-1] + extra
    for words in commands:
        called = _called_scripts(words, scripts)
        if called is None:
            out.append((name, words))
            continue
        for script, more in called:
            out += _parts(scripts, script, more, depth + 1, seen)
    return out


def _called_scripts(words: list[str], scripts: dict[str, str]) -> list[tuple[str, list[str]]] | None:
    """The scripts a command calls with their extra arguments (`npm run a -- -x`, `yarn a`,
    `run-s a b:*`), or None when it calls none."""
    words = _strip_env(words)
    while words and Path(words[0]).name in LAUNCHERS:  # `nyc npm run test:unit`
        words = words[1:]
        while words and (words[0].startswith("-") or "=" in words[0]):
            words = words[1:]
    if not words:
        return None
    head = words[0]
    if head in ("run-s", "run-p", "npm-run-all"):
        names = [w for w in words[1:] if not w.startswith("-")]
        return [(s, []) for n in names for s in _matching(n, scripts)]
    if not _SCRIPT_CALL.match(head) or len(words) < 2:
        return None
    rest = words[1:]
    if rest[0] in ("run", "run-script") and len(rest) > 1:
        rest = rest[1:]
    elif rest[0] in ("test", "t") and head != "bun":  # `bun test` is bun's runner, not the script
        rest = ["test", *rest[1:]]
    elif head in ("npm", "bun"):
        return None  # their own commands (npm ci, npm exec, bun build)
    while rest and rest[0].startswith("-"):  # yarn --silent test
        rest = rest[1:]
    if not rest or rest[0] not in scripts:
        return None  # `yarn jest`: a binary, not a script
    extra = rest[1:]
    if extra and extra[0] == "--":
        extra = extra[1:]
    return [(rest[0], extra)]


def _matching(pattern: str, scripts: dict[str, str]) -> list[str]:
    """npm-run-all's names: `test:*` matches test:a but not test:a:b; `test:**` both."""
    if "*" not in pattern:
        return [pattern] if pattern in scripts else []
    regex = re.escape(pattern).replace(r"\*\*", ".+").replace(r"\*", "[^:]+")
    return [s for s in scripts if re.fullmatch(regex, s)]


def split_shell(line: str) -> list[list[str]]:
    """The commands of a shell line, each as words (`&&`, `||`, `;`, `|`, `&` separate; a
    redirection and its target dropped); [] when it cannot be read (an open quote)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    out: list[list[str]] = [[]]
    skip = False
    for tok in tokens:
        if skip:
            skip = False
        elif tok in ("&&", "||", ";", "|", "&", ";;"):
            out.append([])
        elif tok in ("(", ")"):
            continue
        elif set(tok) <= set("<>&") or re.fullmatch(r"\d?>>?&?\d?", tok):
            skip = not tok.endswith(("&1", "&2"))  # `> out.txt`: its target goes too
        else:
            out[-1].append(tok)
    return [words for words in out if words]


def _strip_env(words: list[str]) -> list[str]:
    """The command without its leading `VAR=value` assignments."""
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1
    return words[i:]


def _env_node_options(words: list[str]) -> list[str]:
    """Flags a `NODE_OPTIONS=...` assignment of the command sets."""
    out: list[str] = []
    for w in words:
        if w.startswith("NODE_OPTIONS="):
            out += w.split("=", 1)[1].split()
    return out


def _classify(words: list[str]) -> tuple[str, str | None, list[str], list[str]]:
    """(kind, runner, runner's arguments, node flags) of one command: kind "runner" (one the
    harness has), "other-runner" (one it has not: runner names it), or "other"."""
    node_options = _env_node_options(words)
    rest = _strip_env(words)
    while rest:
        head = _bin(rest[0])
        if head in RUNNER_BINS:
            return "runner", RUNNER_BINS[head], rest[1:], node_options
        if head in OTHER_RUNNERS or (head in OTHER_BY_SUBCOMMAND and rest[1:2] == ["test"]):
            return "other-runner", " ".join(rest[:2]) if head in OTHER_BY_SUBCOMMAND else head, [], []
        if head == "node":
            return _node(rest[1:], node_options)
        if head in LAUNCHERS or head in ("yarn", "pnpm", "bunx") or (head == "npm" and rest[1:2] == ["exec"]):
            rest = _after_launcher(rest[1:])
            continue
        return "other", None, [], []
    return "other", None, [], []


def _bin(word: str) -> str:
    """The command a word names: its file name, without an npx version (`vitest@1`)."""
    name = Path(word).name
    return name.split("@", 1)[0] if not name.startswith("@") else name


def _after_launcher(words: list[str]) -> list[str]:
    """A launcher's arguments from the command it starts: its options, `VAR=x` assignments and
    values skipped up to the first word that names a runner, `node`, or a launcher, as a bare
    command name (an argument such as `test/mocha` is a path, not a command) or a
    node_modules/.bin path."""
    commands = RUNNER_BINS.keys() | OTHER_RUNNERS | OTHER_BY_SUBCOMMAND | LAUNCHERS | {"node"}
    for i, w in enumerate(words):
        if _bin(w) in commands and ("/" not in w or "node_modules/.bin/" in w):
            return words[i:]
    return []


def _node(argv: list[str], node_options: list[str]) -> tuple[str, str | None, list[str], list[str]]:
    """`node [flags] --test [paths]`, `node [flags] node_modules/.bin/jest ...`, or a wrapper
    script that starts a runner (`node bin/hotfix.js mocha ...`)."""
    flags: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        flags.append(argv[i])
        if argv[i] in ("-r", "--require", "--import", "--loader", "--experimental-loader") and i + 1 < len(argv):
            flags.append(argv[i + 1])
            i += 1
        i += 1
    rest = argv[i:]
    if "--test" in flags:
        return "runner", "node-test", [*node_options, *(f for f in flags if f != "--test"), *rest], []
    if rest and (m := _BIN_PATH.search(rest[0])):
        name = m.group(1) or m.group(2)
        return "runner", RUNNER_BINS[name], rest[1:], [*node_options, *flags]
    if len(rest) > 1 and rest[1] in RUNNER_BINS:  # a wrapper script, then the runner by name
        return "runner", RUNNER_BINS[rest[1]], rest[2:], [*node_options, *flags]
    if len(rest) > 1 and rest[1] in OTHER_RUNNERS:
        return "other-runner", rest[1], [], []
    return "other", None, [], []


def vet(runner: str, argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(options passed on, positional paths, "option: why" left out) of a runner's arguments."""
    table = OPTIONS[runner]
    args: list[str] = []
    paths: list[str] = []
    ignored: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            continue
        if not arg.startswith("-") or arg == "-":
            if runner == "vitest" and not paths and arg in VITEST_COMMANDS:
                continue
            if "$" not in arg and "{" not in arg.replace("{,", ""):
                paths.append(arg.rstrip("/") or arg)
            continue
        name, eq, value = arg.partition("=")
        option = table.get(name)
        if option is None and (runner in ("mocha", "node-test") and NODE_FLAG.match(arg)):
            option = Option(takes_value=False)
        if option is None:
            ignored.append(f"{arg}: not an option the harness passes on")
            continue
        if option.takes_value and not eq:
            value, i = (argv[i] if i < len(argv) else ""), i + 1
            arg = f"{arg} {value}".strip()
        if option.why is None:
            args += [name, value] if option.takes_value and not eq else [arg]
        elif option.why:
            ignored.append(f"{arg}: {option.why}")
    return args, paths, ignored


def _from_config(snapshot: Path, package: dict[str, Any], dependencies: bool) -> tuple[str, str | None]:
    """(where, runner) from the runners' configuration files, then (`dependencies`) the
    dependencies."""
    for pattern, runner in CONFIG_FILES:
        for path in sorted(snapshot.glob(pattern)):
            vite = runner == "vitest" and path.name.startswith("vite.config")
            if vite and not re.search(r"^\s*test\s*:", _text(path), re.M):
                continue  # vite's own configuration, without vitest's section
            return path.name if path.parent == snapshot else path.relative_to(snapshot).as_posix(), runner
    if isinstance(package.get("jest"), dict):
        return "package.json jest", "jest"
    if isinstance(package.get("mocha"), dict):
        return "package.json mocha", "mocha"
    for field in ("devDependencies", "dependencies") if dependencies else ():
        deps = package.get(field)
        if isinstance(deps, dict):
            for name, runner in (("jest", "jest"), ("vitest", "vitest"), ("mocha", "mocha")):
                if name in deps:
                    return field, runner
    return "", None


# A runner's configuration files, in the order they decide.
CONFIG_FILES = (
    ("jest.config.*", "jest"),
    ("vitest.config.*", "vitest"),
    ("vitest.workspace.*", "vitest"),
    ("vite.config.*", "vitest"),
    (".mocharc.*", "mocha"),
    ("test/mocha.opts", "mocha"),
)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
