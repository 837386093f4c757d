#!/usr/bin/env bash
# Run tests/core with only the core distribution (trainbus) installed, without a new environment:
# an interpreter started with -S (site-packages and its .pth install hooks are not processed, so
# no editable plugin install is found) whose path holds core/src and a view of the environment's
# site-packages without any trainbus plugin distribution (no entry point of theirs is read).
#
#   tools/test_core_alone.sh [PYTHON] [pytest arguments...]    # PYTHON: default .venv/bin/python
#
# The processes a test starts with sys.executable process site-packages as usual; what they run
# is read by tests/contract/test_core_alone.py instead. tools/bootstrap.sh test runs this first.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-$ROOT/.venv/bin/python}
shift $(( $# > 0 ? 1 : 0 ))
VIEW=$(mktemp -d "${TMPDIR:-/tmp}/trainbus-core-alone.XXXXXX")
trap 'rm -rf "$VIEW"' EXIT
for site in $("$PY" -c 'import sysconfig; p = sysconfig.get_paths(); print(*sorted({p["purelib"], p["platlib"]}))'); do
  for entry in "$site"/*; do
    name=$(basename "$entry")
    case "$name" in
      trainbus_*|__editable__*|*.pth) continue ;;  # the plugin distributions and the install hooks
    esac
    [ -e "$VIEW/$name" ] || ln -s "$entry" "$VIEW/$name"
  done
done
cd "$ROOT"
status=0
PYTHONPATH="$ROOT/core/src:$VIEW" "$PY" -S -m pytest tests/core -p no:xdist -q "$@" || status=$?
exit "$status"
