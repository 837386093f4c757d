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
# How: ONE interpreter calls each directory's PEP 517 build backend (its pyproject.toml's
# build-system.build-backend, setuptools.build_meta for all of them) in turn: `build_wheel`.
# * The backend is taken from the interpreter's own environment (no build isolation), so
#   nothing is downloaded and the build works offline; build isolation would fetch setuptools
#   from an index for each of the ~23 builds. `python -m build` is not used: it is an extra
#   package, and without --no-isolation it also downloads the backend.
# * Not `pip wheel`: it runs the backend's hooks of every project in fresh subprocesses (three
#   per project), about 30 s for the ~23 directories against 8 s in one interpreter. The
#   wheels are the same files.
# * Only the wheels of this repository go into DIR; third-party dependencies (numpy, pluggy,
#   TensorFlow, ...) come from the index or the environment at install time.
# * each directory is copied to a temporary place first: setuptools reuses a stale build/
#   directory inside the source tree, which could put deleted modules into a wheel.
#
# The interpreter is $PYTHON, else .venv/bin/python, else python3; it needs setuptools>=77 (and wheel).
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
"$PY" - "$OUT" "${copies[@]}" <<'PYEOF'
import contextlib, importlib, io, os, sys, tomllib
out, dirs = sys.argv[1], sys.argv[2:]
for d in dirs:
    with open(os.path.join(d, "pyproject.toml"), "rb") as f:
        spec = tomllib.load(f).get("build-system", {}).get("build-backend", "setuptools.build_meta:__legacy__")
    module, _, attr = spec.partition(":")
    backend = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        backend = getattr(backend, part)
    os.chdir(d)
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            backend.build_wheel(out)
    except BaseException:
        sys.stderr.write(f"build_wheels.sh: building the wheel of {os.path.basename(d)} failed:\n{log.getvalue()[-4000:]}\n")
        raise
PYEOF
echo "built ${#copies[@]} wheels into $OUT:"
ls "$OUT"/trainbus*.whl | sed 's|.*/|  |'
echo "install with: pip install --find-links $OUT \"trainbus[standard]\"   (or one plugin: pip install --find-links $OUT trainbus-inference)"
