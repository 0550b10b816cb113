"""node.py's pure parts: which Node a request matches, which npm rebuilds on which Node, what
needs a rebuild, which files the host step copies, and how a package tarball is unpacked."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from reward.execution import node


def test_a_request_matches_its_major_or_its_exact_version():
    assert node.matches("20", "20.20.2") and node.matches("20.20.2", "20.20.2")
    assert not node.matches("2", "20.20.2") and not node.matches("18", "20.20.2")


@pytest.mark.parametrize(
    ("version", "npm"),
    [("24.1.0", "npm@10.9.2"), ("20.20.2", "npm@10.9.2"), ("19.8.1", "npm@9.9.4"), ("16.20.2", "npm@8.19.4"),
     ("12.22.12", "npm@6.14.18"), ("10.24.1", "npm@6.14.18")],
)  # fmt: skip
def test_the_rebuild_runs_an_npm_that_starts_on_the_toolchain(version, npm):
    assert node.npm_for(version) == npm


def test_only_a_dependency_with_an_install_script_or_an_addon_needs_the_rebuild(tmp_path):
    def package(rel: str, manifest: dict) -> None:
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "package.json").write_text(json.dumps(manifest))

    package("node_modules/plain", {"name": "plain", "scripts": {"test": "x", "prepare": "y"}})
    package("node_modules/@scope/quiet", {"name": "@scope/quiet"})
    package("node_modules/plain/fixtures/app", {"scripts": {"postinstall": "x"}})  # not a package folder
    assert not node.needs_rebuild(tmp_path)
    package("node_modules/@scope/hook", {"name": "@scope/hook", "scripts": {"postinstall": "node x.js"}})
    assert node.needs_rebuild(tmp_path)
    (tmp_path / "node_modules/@scope/hook/package.json").write_text("{}")
    (tmp_path / "node_modules/plain/binding.gyp").write_text("{}")
    assert node.needs_rebuild(tmp_path)


def test_the_lock_file_and_its_tool(tmp_path):
    assert node.lock_file(tmp_path) is None
    (tmp_path / "yarn.lock").write_text('__metadata:\n  version: 6\n"a@npm:1": {}\n')
    assert node.lock_file(tmp_path) is None  # yarn 2+: not a lock yarn 1 reads
    (tmp_path / "yarn.lock").write_text('# yarn lockfile v1\n\na@^1.0.0:\n  version "1.0.0"\n')
    assert node.lock_file(tmp_path) == ("yarn.lock", "yarn")
    (tmp_path / "package-lock.json").write_text("{}")
    assert node.lock_file(tmp_path) == ("package-lock.json", "npm")


def test_the_host_step_copies_the_manifests_of_workspaces_and_vendored_tarballs_inside_only(tmp_path):
    manifest = {
        "workspaces": ["packages/*", "../outside/*"],
        "devDependencies": {"dep": "file:vendor/dep-1.0.0.tgz", "up": "file:../up.tgz", "dir": "file:vendor/dir"},
    }
    (tmp_path / "package.json").write_text(json.dumps(manifest))
    for rel in ("packages/a/package.json", "packages/b/package.json", "vendor/dep-1.0.0.tgz"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    (tmp_path / "packages/c").mkdir()  # no manifest: not a workspace
    assert node.workspace_manifests(tmp_path) == ["packages/a/package.json", "packages/b/package.json"]
    assert node.vendored(tmp_path) == ["vendor/dep-1.0.0.tgz"]


def test_a_package_tarball_unpacks_its_package_folder_and_nothing_outside(tmp_path):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, body in (("package/bin/node", b"ELF"), ("package/../evil", b"x"), ("other/file", b"y")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        link = tarfile.TarInfo("package/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    archive = tmp_path / "p.tgz"
    archive.write_bytes(data.getvalue())
    node._extract(archive, tmp_path / "out")
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")) == ["bin", "bin/node"]
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("test/unit/a/b.js", ("test/unit/**/*.js",), True),
        ("test/unit/b.js", ("test/unit/**/*.js",), True),
        ("test/specs/b.spec.js", ("test/unit/**/*.js",), False),
        ("test/app.js", ("test/",), True),
        ("test/app.js", ("./test",), True),
        ("testing/app.js", ("test",), False),
        ("src/x.test.ts", ("src/**/*.{test,spec}.ts",), True),
        ("src/x.spec.tsx", ("src/**/*.{test,spec}.ts",), False),
        ("anything.js", (), True),
    ],
)
def test_the_runners_selection_reads_files_folders_and_globs(path, patterns, expected):
    from reward.execution.runners import selected

    assert selected(path, patterns) is expected


def test_pnpm_lock_files_their_workspaces_and_the_pnpm_that_reads_them(tmp_path):
    (tmp_path / "package.json").write_text(json.dumps({"private": True}))
    (tmp_path / "pnpm-lock.yaml").write_text("lockfileVersion: '6.0'\n")
    (tmp_path / "yarn.lock").write_text("# yarn lockfile v1\n")
    assert node.lock_file(tmp_path) == ("yarn.lock", "yarn")  # LOCK_FILES' order without packageManager
    assert node.pnpm_for(tmp_path) == "pnpm@8.15.9"
    (tmp_path / "package.json").write_text(json.dumps({"packageManager": "pnpm@10.12.1+sha512.abc"}))
    assert node.lock_file(tmp_path) == ("pnpm-lock.yaml", "pnpm") and node.pnpm_for(tmp_path) == "pnpm@10.12.1"
    (tmp_path / "pnpm-workspace.yaml").write_text(
        "packages:\n  - packages/*\n  - 'apps/*'  # apps\n  - '!packages/skip'\nhoistWorkspacePackages: false\n"
    )
    for rel in ("packages/zod", "apps/docs", "packages/skip"):
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "package.json").write_text("{}")
    assert node.workspace_manifests(tmp_path) == [
        "packages/skip/package.json",  # pnpm's own exclusion is pnpm's: a manifest too many costs nothing
        "packages/zod/package.json",
        "apps/docs/package.json",
    ]
