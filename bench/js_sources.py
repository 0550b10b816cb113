"""How many real JavaScript repositories' manifests and lock files the host step's source check
(reward/execution/jssources.py) refuses: its false-alarm rate, and what it refuses.

    python bench/js_sources.py CLONE [CLONE ...] [--commits 6]

For each clone (a bare or full git directory), the commits that touched its lock file or root
package.json, `--commits` of them spread over its history (the newest included), are read with
git alone (package.json, the workspaces' package.json files, the lock file and
pnpm-workspace.yaml written to a temporary folder), then checked as the environment build
checks them. Prints one line per refusal (repository, commit, the start of the reason) and the
table `repository  commits  with a lock  refused`; the last line reads
`js sources: N commits, R refused`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reward.execution import jssources, node  # noqa: E402

_WANTED = ("package.json", "pnpm-workspace.yaml", *(name for name, _ in node.LOCK_FILES))


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout


def commits(clone: Path, count: int) -> list[str]:
    """`count` commits that changed the root manifests, spread evenly, the newest first."""
    touched = _git(clone, "log", "--format=%H", "HEAD", "--", *_WANTED).split()
    if len(touched) <= count:
        return touched
    step = len(touched) / count
    return [touched[int(i * step)] for i in range(count)]


def checkout_manifests(clone: Path, commit: str, dest: Path) -> None:
    """package.json files (not under node_modules), lock files and pnpm-workspace.yaml at `commit`."""
    names = _git(clone, "ls-tree", "-r", "--name-only", commit).splitlines()
    for name in names:
        if Path(name).name in _WANTED and "node_modules" not in Path(name).parts and name.count("/") <= 4:
            data = subprocess.run(["git", "-C", str(clone), "show", f"{commit}:{name}"], capture_output=True).stdout
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clones", nargs="+", type=Path)
    parser.add_argument("--commits", type=int, default=6)
    args = parser.parse_args()
    rows, total, refused = [], 0, 0
    for clone in args.clones:
        name = clone.parent.name if clone.name == "repo" else clone.name
        seen = locked = bad = 0
        for commit in commits(clone, args.commits):
            with tempfile.TemporaryDirectory() as tmp:
                snapshot = Path(tmp)
                checkout_manifests(clone, commit, snapshot)
                if not (snapshot / "package.json").is_file():
                    continue
                seen += 1
                lock = node.lock_file(snapshot)
                locked += lock is not None
                try:
                    manifests = ["package.json", *node.workspace_manifests(snapshot)]
                    jssources.check(snapshot, manifests, lock[0] if lock else None)
                except jssources.ForeignSource as exc:
                    bad += 1
                    print(f"{name} {commit[:10]} refused: {str(exc)[:400]}")
        rows.append((name, seen, locked, bad))
        total, refused = total + seen, refused + bad
    print(f"{'repository':28} {'commits':>8} {'with a lock':>12} {'refused':>8}")
    for name, seen, locked, bad in rows:
        print(f"{name:28} {seen:8d} {locked:12d} {bad:8d}")
    print(f"js sources: {total} commits, {refused} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
