"""A compiled repository's release sdist through the harness's build: its SWE-bench environment,
its C/Cython modules built in the sandbox and laid over the snapshot, some of its test modules.

    python bench/compiled_sdist.py [--package scikit-learn --version 1.3.0
        --repo scikit-learn/scikit-learn --spec 1.3 --date 2023-06-30T00:00:00Z
        --tests sklearn/tests/test_base.py sklearn/linear_model/tests/test_ridge.py]

For repositories whose clone these machines cannot fetch (scikit-learn's is 788 MB): the
release's sdist from PyPI (cached under .cache/sdists) is the snapshot. Prints one JSON object:
the environment's spec, build seconds (environment and modules, cold unless cached), the number
of compiled modules kept, and the tests' pytest summary line and exit status.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from data.swebench_exec import environment, spec_for  # noqa: E402
from reward.execution import identity, repos, sandbox  # noqa: E402
from reward.execution.environments import Environments  # noqa: E402

CACHE = ROOT / ".cache" / "sdists"


def sdist(package: str, version: str) -> Path:
    """The release's source tree, downloaded once from PyPI's simple index and unpacked."""
    tree = CACHE / f"{package}-{version}"
    if tree.is_dir():
        return tree
    index = urllib.request.urlopen(f"https://pypi.org/simple/{package}/", timeout=60).read().decode()
    name = re.escape(f"{package.replace('-', '[-_]')}-{version}.tar.gz").replace("\\[\\-_\\]", "[-_]")
    match = re.search(rf'href="(https://[^"#]*/{name})', index)
    if match is None:
        raise SystemExit(f"no sdist of {package} {version} on PyPI's index")
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / Path(match.group(1)).name
    with urllib.request.urlopen(match.group(1), timeout=300) as src, archive.open("wb") as out:
        shutil.copyfileobj(src, out)
    tmp = tree.with_name(tree.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    (top,) = tmp.iterdir()
    top.rename(tree)
    tmp.rmdir()
    for path in [tree, *tree.rglob("*")]:  # as snapshots.py leaves a snapshot
        identity.give(path)
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="scikit-learn")
    parser.add_argument("--version", default="1.3.0")
    parser.add_argument("--repo", default="scikit-learn/scikit-learn")
    parser.add_argument("--spec", default="1.3", help="the SWE-bench spec's version")
    parser.add_argument("--date", default="2023-06-30T00:00:00Z", help="the environment's exclude_newer")
    tests = ["sklearn/tests/test_base.py", "sklearn/linear_model/tests/test_ridge.py"]
    parser.add_argument("--tests", nargs="+", default=tests, help="test files, relative to the tree")
    args = parser.parse_args(argv)
    if (why := sandbox.available()) is not None:
        raise SystemExit(f"bench/compiled_sdist.py: {why}")
    tree = sdist(args.package, args.version)
    spec = environment(spec_for(repos.swebench_specs(), args.repo, args.spec), [], lambda rel: None, args.date)
    envs = Environments(ROOT / ".cache" / "execution" / "envs", build_timeout_s=3600)
    start = time.monotonic()
    env = envs.ensure(spec, tree)
    built_s = time.monotonic() - start
    modules = sum(1 for layer in env.layers for _ in Path(layer).rglob("*.so"))
    argv = [env.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", *args.tests]
    start = time.monotonic()
    limits = sandbox.Limits(wall_s=3600)
    result = sandbox.run(
        argv, snapshot=tree, ro_paths=env.ro_paths, env=env.variables, layers=env.layers, limits=limits
    )
    lines = reversed(result.stdout.splitlines())
    summary = next((ln for ln in lines if " in " in ln and ("passed" in ln or "failed" in ln)), "")
    print(json.dumps({
        "package": f"{args.package} {args.version}",
        "environment": json.loads(spec.to_json()),
        "build_s": round(built_s, 1),
        "compiled_modules": modules,
        "tests": args.tests,
        "tests_s": round(time.monotonic() - start, 1),
        "returncode": result.returncode,
        "summary": summary.strip("= "),
    }, indent=1))  # fmt: skip
    return 0 if result.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
