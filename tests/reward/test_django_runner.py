"""Django's test runner under the harness: `EnvSpec.runner == "django"`.

Two repositories:
- a small one written here with django's layout (a `tests/runtests.py` built on unittest that
  takes dotted labels, a module at the top that the tests import), run by the project's
  interpreter: the unittest recorder's outcomes (docstring-named tests, subtests, expected
  failures, skips, a failing setUpClass), the verdict, the canaries, the guarded tests/ folder
  and the forgeries the recorder must catch. No network.
- Django's own 5.0 release sdist from PyPI (tests/ and runtests.py ship in it) with the
  environment SWE-bench's spec for 5.0 names (Python 3.11, tests/requirements/py3.txt), run
  exactly as SWE-bench runs it: a gold patch resolves, the empty patch does not, and each
  test's id is the name the runner's log prints before " ... ok" (what SWE-bench's log parser
  reads). Skipped without the package index or a sandbox.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from conf.config import ExecutionConfig
from data.patching import make_patch
from data.schema import Instance
from data.swebench_exec import locale_only
from reward.execution import repos, sandbox
from reward.execution.environments import EnvSpec
from reward.execution.report import Canaries
from reward.execution.runner import Runner, TestJob, command
from reward.execution.runners import Django, runner_for

pytestmark = pytest.mark.skipif(sandbox.available() is not None, reason=f"sandbox unavailable: {sandbox.available()}")

RUNTESTS = """\
import argparse
import sys
import unittest

parser = argparse.ArgumentParser()
parser.add_argument("--verbosity", type=int, default=1)
parser.add_argument("labels", nargs="*")
args = parser.parse_args()
suite = unittest.defaultTestLoader.loadTestsFromNames(args.labels)
result = unittest.TextTestRunner(verbosity=args.verbosity).run(suite)
sys.exit(bool(result.failures or result.errors))
"""
CALC = "def add(a, b):\n    return a + abs(b)\n"  # the bug: a negative b is added as positive
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = '''\
import unittest

from django.test import SimpleTestCase

from calc import add


class AddTests(SimpleTestCase):
    def test_add(self):
        self.assertEqual(add(1, 2), 3)

    def test_negative(self):
        """Adds two negatives."""
        self.assertEqual(add(-1, -1), -2)

    def test_range(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertEqual(add(i, 0), i)

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(add(1, 1), 3)

    @unittest.skip("not today")
    def test_skipped(self):
        pass


class BrokenFixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("no fixture")

    def test_never_runs(self):
        pass
'''
NEGATIVE = '''
    def test_negative(self):
        """Adds two negatives."""
        self.assertEqual(add(-1, -1), -2)
'''
BASE_TESTS = TESTS.replace(NEGATIVE, "")  # the test patch adds test_negative
# django's test classes, as small as the runner needs: code under test, as django's own are.
DJANGO_TEST = "import unittest\n\n\nclass SimpleTestCase(unittest.TestCase):\n    pass\n\n\nclass TestCase(SimpleTestCase):\n    pass\n"
FILES = {
    "calc.py": CALC,
    "django/__init__.py": "",
    "django/test.py": DJANGO_TEST,
    "tests/runtests.py": RUNTESTS,
    "tests/app/__init__.py": "",
    "tests/app/tests.py": BASE_TESTS,
}


def tid(method: str, cls: str = "AddTests", module: str = "app.tests") -> str:
    """unittest's str(test) on this interpreter (Python 3.11 adds the method after the class)."""
    return f"{method} ({module}.{cls}.{method})" if sys.version_info >= (3, 11) else f"{method} ({module}.{cls})"


DOC_ID = "Adds two negatives."
SPEC = EnvSpec(runner="django", runner_args=())  # the project's interpreter; no settings in this runner


def instance(**kw) -> Instance:
    base = dict(
        instance_id="unit__calc-1",
        repo="unit/calc",
        base_commit="0" * 40,
        problem_statement="add() ignores the sign of its second argument",
        patch=make_patch({"calc.py": CALC}, {"calc.py": FIXED}),
        test_patch=make_patch({"tests/app/tests.py": BASE_TESTS}, {"tests/app/tests.py": TESTS}),
        code_context=dict(FILES),
        oracle_new_content={"calc.py": FIXED},
        fail_to_pass=(DOC_ID,),
        pass_to_pass=(tid("test_add"), tid("test_range")),
        environment=SPEC.to_json(),
    )
    base.update(kw)
    return Instance(**base)


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    cache = tmp_path_factory.mktemp("exec")
    return Runner(ExecutionConfig(cache_dir=str(cache), wall_s=60.0, cpu_s=60, output_kb=256))


def job(patch: str, **kw) -> TestJob:
    return TestJob(instance(**kw), patch)


def test_labels_are_runtests_dotted_modules_and_the_canaries_share_the_last_package():
    assert Django().label("tests/admin_views/tests.py") == "admin_views.tests"
    assert Django().label("tests/template_tests/filter_tests/__init__.py") == "template_tests.filter_tests"
    assert runner_for("django").guarded_dirs == ("tests",) and runner_for("pytest").guarded_dirs == ()
    argv, canaries = command(
        "/py", dataclasses.replace(SPEC, runner_args=("--settings=test_sqlite",)), ["tests/a/b.py"]
    )
    assert argv[4:] == [
        "--unittest",
        "tests/runtests.py",
        "--verbosity",
        "2",
        "--settings=test_sqlite",
        "a.b",
        canaries.label,
    ]
    assert canaries.path.startswith("tests/a/test_") and canaries.label.startswith("a.test_")
    assert command("/py", SPEC, ["src/pkg/test_x.py"])[0] == []  # nothing under tests/: no labels
    # both of unittest's spellings of a test are the canary's, another module's is not
    found = Canaries.ids(canaries, {f"{k})": "passed" for k in canaries.expected} | {"x (a.b.C)": "passed"})
    assert len(found) == len(canaries.expected) == 12  # a pair of classes per base: unittest's, django's two
    assert "class Test" in canaries.source and "(django.test.SimpleTestCase)" in canaries.source


def test_the_runner_is_part_of_the_spec_but_not_of_the_environment_it_builds(tmp_path):
    from reward.execution.environments import Environments

    with pytest.raises(ValueError, match="runner 'nose'"):
        EnvSpec(runner="nose")
    plain, django = EnvSpec(python="3.11"), EnvSpec(python="3.11", runner="django", runner_args=("--parallel", "1"))
    assert "runner" not in plain.to_json()  # pytest specs read as before the field existed
    assert EnvSpec.from_json(django.to_json()) == django
    envs = Environments(tmp_path)
    assert envs.key(plain, None) == envs.key(django, None)


def test_swebench_command_and_locale_of_django_specs():
    django = repos.lookup("django/django")
    assert django.command_at("4.2") == ("django", ("--settings=test_sqlite", "--parallel", "1"))
    assert django.command_at("1.9") == ("django", ())
    assert repos.lookup("psf/requests").command_at("2.0") == ("pytest", ())
    locale = ["apt-get update && apt-get install -y locales", "echo 'en_US UTF-8' > /etc/locale.gen"]
    assert locale_only({"pre_install": [*locale, "locale-gen en_US.UTF-8"]})
    assert not locale_only({"pre_install": [*locale, "apt-get install -y libmemcached-dev"]})


def test_the_unittest_recorder_reports_every_kind_of_outcome(runner):
    run = runner.run(job(""))
    assert run.status == "ok", (run.reason, run.log)
    assert run.outcomes == {
        tid("test_add"): "passed",
        DOC_ID: "failed",  # named by its docstring's first line, as the runner prints it
        tid("test_range"): "passed",
        tid("test_expected_failure"): "skipped",
        tid("test_skipped"): "skipped",
        "setUpClass (app.tests.BrokenFixture)": "error",  # its test never ran: absent
    }
    assert "AssertionError: 0 != -2" in run.failures[DOC_ID]
    assert run.resolved is False


def test_the_fix_resolves_and_a_failing_subtest_fails_its_test(runner):
    assert runner.run(job(make_patch({"calc.py": CALC}, {"calc.py": FIXED}))).resolved is True
    broken = FIXED.replace("return a + b", "return a + b + (a == 2)")
    run = runner.run(job(make_patch({"calc.py": CALC}, {"calc.py": broken})))
    assert run.outcomes[tid("test_range")] == "failed" and run.outcomes[DOC_ID] == "passed"
    assert run.resolved is False


def test_the_runner_owns_tests_a_candidate_change_there_is_not_applied(runner):
    forged = {
        "calc.py": CALC,
        "tests/runtests.py": "import sys\nsys.exit(0)\n",
        "tests/app/tests.py": BASE_TESTS + "\n\nclass Extra(unittest.TestCase):\n    pass\n",
    }
    run = runner.run(job(make_patch({k: FILES[k] for k in forged}, forged)))
    assert set(run.guarded) == {"tests/runtests.py", "tests/app/tests.py"}
    assert run.outcomes[DOC_ID] == "failed" and run.resolved is False


@pytest.mark.parametrize(
    "attack",
    [
        # every failure reported as a success, in unittest's own result class
        "import unittest\nunittest.TestResult.addFailure = lambda self, test, err: self.addSuccess(test)\n",
        # assertions that never fail
        "import unittest\nunittest.TestCase.assertEqual = lambda self, a, b, msg=None: None\n",
        # django's own test class made to report every test passed (django is code under test)
        "import django.test\n"
        "def _run(self, result=None):\n"
        "    result.startTest(self)\n    result.addSuccess(self)\n    result.stopTest(self)\n"
        "django.test.SimpleTestCase.run = _run\n",
        # the report's end written early into every descriptor that could be the report's
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'{\"exit\": 0}\\n')\n"
        "    except OSError:\n        pass\n",
    ],
    ids=["result_class", "assertions", "django_test_class", "early_exit_record"],
)
def test_code_under_test_cannot_forge_the_unittest_report(runner, attack):
    run = runner.run(job(make_patch({"calc.py": CALC}, {"calc.py": attack + CALC})))
    assert run.resolved is not True, (run.status, run.outcomes)
    assert run.status == ("bad_report" if "range(3, 64)" in attack else "tampered"), (run.status, run.reason)


# --- Django's own sdist ------------------------------------------------------------------------

DJANGO = "5.0.9"  # SWE-bench's 5.0 spec: Python 3.11, the interpreter CI has


@pytest.fixture(scope="module")
def django_sdist(tmp_path_factory):
    """Django's release sdist as a one-commit repository, its SWE-bench environment and runner."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import django_sdists

    cache = Path(__file__).resolve().parents[2] / ".cache" / "sdists"
    try:
        repo, head, date = django_sdists.sdist_repo(DJANGO, cache)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"Django {DJANGO}'s sdist could not be downloaded (no package index?): {exc}")
    env = django_sdists.release_env("5.0", repo, date)
    exec_cache = tmp_path_factory.mktemp("django-exec")
    runner = Runner(ExecutionConfig(cache_dir=str(exec_cache), repos=[f"django/django={repo}"], wall_s=300))
    inst, gold = django_sdists.made_instance(repo, head, env)
    return django_sdists, runner, inst, gold


def test_django_sdist_runs_as_swebench_runs_it(django_sdist, monkeypatch):
    bench, runner, inst, gold = django_sdist
    outputs: list[str] = []  # each sandboxed command's whole output (TestRun.log keeps only its end)
    real_run = sandbox.run

    def keeping(*args, **kwargs):
        result = real_run(*args, **kwargs)
        outputs.append(result.stdout + result.stderr)
        return result

    monkeypatch.setattr(sandbox, "run", keeping)
    spec = EnvSpec.from_json(inst.environment)
    assert spec is not None and (spec.runner, spec.python) == ("django", "3.11")
    assert "asgiref>=3.7.0" in spec.requirements or any(r.startswith("asgiref") for r in spec.requirements)
    base = runner.run(TestJob(inst, "", "base"))
    log = outputs[-1]  # the test run's, after any build
    if base.status == "env_failed":
        pytest.skip(f"Django {DJANGO}'s environment could not be built here: {base.reason}")
    assert base.status == "ok", (base.reason, base.log)
    labelled = bench.labelled(inst, base)
    twice = "test_swe_rl_twice (utils_tests.test_text.TestUtilsText.test_swe_rl_twice)"
    assert set(labelled.fail_to_pass) == {twice, bench.DOC}
    assert base.outcomes[twice] == "error" and base.outcomes[bench.DOC] == "error"  # AttributeError at base
    assert len(labelled.pass_to_pass) >= 10
    # each id is what the runner's verbosity-2 log prints before " ... " (SWE-bench's parser's key)
    missing = [t for t in labelled.pass_to_pass if f"{t} ... ok" not in log]
    assert not missing, missing
    assert runner.run(TestJob(labelled, gold, "gold")).resolved is True
    assert runner.run(TestJob(labelled, "", "empty")).resolved is False


def test_a_django_row_converts_to_swebench_command_and_resolves_from_its_shard(django_sdist, tmp_path):
    """data.swebench_exec on a django row (no version: read from django/__init__.py's VERSION)
    writes the runner into the instance's environment; the instance read back from its shard
    runs under it, with SWE-bench's label names, and the gold patch resolves it."""
    import json

    from data.loader import read_instances
    from data.swebench_exec import convert

    bench, runner, inst, gold = django_sdist
    twice = "test_swe_rl_twice (utils_tests.test_text.TestUtilsText.test_swe_rl_twice)"
    row = {
        "instance_id": "django__django-99999",
        "repo": "django/django",
        "base_commit": inst.base_commit,
        "problem_statement": "text has no swe_rl_twice",
        "patch": gold,
        "test_patch": inst.test_patch,
        "FAIL_TO_PASS": json.dumps([twice, bench.DOC]),
        "PASS_TO_PASS": "[]",
        "created_at": spec_of(inst).exclude_newer,  # the fixture's date: the same environment, built once
    }
    (tmp_path / "rows.json").write_text(json.dumps([row]))
    built = runner.envs.builds
    clone = runner.snapshots.clones["django/django"]
    manifest = convert([str(tmp_path / "rows.json")], [f"django/django={clone}"], str(tmp_path / "out"), [], False)
    assert (manifest["instances"], manifest["notes"].get("version_from_clone")) == (1, 1), manifest
    (converted,) = read_instances(str(tmp_path / "out"), 0)
    spec = EnvSpec.from_json(converted.environment)
    assert spec is not None
    assert (spec.runner, spec.runner_args, spec.python) == (
        "django",
        ("--settings=test_sqlite", "--parallel", "1"),
        "3.11",
    )
    assert runner.run(TestJob(converted, gold)).resolved is True
    assert runner.run(TestJob(converted, "")).resolved is False
    assert runner.envs.builds == built  # the converted row's environment is the release's own


def spec_of(inst: Instance) -> EnvSpec:
    spec = EnvSpec.from_json(inst.environment)
    assert spec is not None
    return spec


def test_an_always_equal_value_under_the_unittest_runner_is_tampered(runner):
    """The probe (bootstrap.EqualityProbe) watches the FAIL_TO_PASS test from startTest to stopTest."""
    forged = (
        "class Yes:\n    __eq__ = lambda self, other: True\n    __hash__ = object.__hash__\n\n\n"
        "def add(a, b):\n    return a + b if b >= 0 else Yes()\n"
    )
    run = runner.run(job(make_patch({"calc.py": CALC}, {"calc.py": forged})))
    assert run.resolved is not True, (run.status, run.outcomes)
    assert run.status == "tampered" and "Yes == a fresh object() is true" in (run.reason or ""), run.reason
