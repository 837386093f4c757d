#!/usr/bin/env bash
# Build a wheelhouse of every trainbus distribution: the core (core/) and each plugins/*/.
#
#   tools/build_wheels.sh [DIR]      # default DIR: dist/ (at the top of the checkout)
#   pip install --find-links dist "trainbus[standard]"
#   pip install --find-links dist trainbus-inference
#
# The distributions are not published on a package index: this directory of wheels is what
# `pip install --find-links` resolves them (and the bundle extras) from.
#
# How: ONE `pip wheel --no-deps --no-build-isolation` over all the directories.
# * --no-build-isolation: the build backend (setuptools>=77, core/pyproject.toml's
#   build-system) is taken from the interpreter's own environment, so nothing is downloaded and
#   the build works offline; build isolation would fetch setuptools from an index for each
#   of the ~23 builds. `python -m build` is not used: it is an extra package, and without
#   --no-isolation it also downloads the backend.
# * --no-deps: only the wheels of this repository go into DIR; third-party dependencies
#   (numpy, pluggy, TensorFlow, ...) come from the index or the environment at install time.
# * each directory is copied to a temporary place first: setuptools reuses a stale build/
#   directory inside the source tree, which could put deleted modules into a wheel.
#
# The interpreter is $PYTHON, else .venv/bin/python, else python3; it needs pip and setuptools>=77.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/dist}
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python
else PY=python3
fi
if ! "$PY" -c 'import sys, setuptools; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null; then
  echo "build_wheels.sh: $PY has no setuptools>=77 (the build backend of every trainbus distribution)." >&2
  echo "Install it into that environment first: $PY -m pip install 'setuptools>=77' wheel" >&2
  exit 1
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/trainbus-wheels.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
dirs=("$ROOT/core")
for d in "$ROOT"/plugins/*/; do
  [ -f "$d/pyproject.toml" ] && dirs+=("${d%/}")
done
copies=()
for d in "${dirs[@]}"; do
  name=$(basename "$d")
  mkdir -p "$WORK/$name"
  # sources only: no build leftovers of the checkout
  (cd "$d" && tar --exclude=build --exclude=dist --exclude='*.egg-info' --exclude=__pycache__ \
     --exclude=.pytest_cache -cf - .) | (cd "$WORK/$name" && tar -xf -)
  copies+=("$WORK/$name")
done
PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip wheel -q --no-deps --no-build-isolation --wheel-dir "$OUT" "${copies[@]}"
echo "built ${#copies[@]} wheels into $OUT:"
ls "$OUT"/trainbus*.whl | sed 's|.*/|  |'
echo "install with: pip install --find-links $OUT \"trainbus[standard]\"   (or one plugin: pip install --find-links $OUT trainbus-inference)"
