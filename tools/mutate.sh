#!/usr/bin/env bash
# Mutation testing of the modules whose mistakes lose work or change results, each against its own
# tests (tools/mutate.py makes one small change at a time in a scratch copy of the repository and
# reports the changes no test notices). Slow: not part of CI; run it before resolving an issue that
# touches these modules, then kill each survivor with a test or list it as equivalent in
# docs/reliability.md ("Mutation testing").
#
#   bash tools/mutate.sh                 # every target below
#   bash tools/mutate.sh fastrun saver   # only the targets whose name is given
#   MUTATE_MAX=20 bash tools/mutate.sh   # at most 20 mutants per target
#   MUTATE_ONLY=survivors.txt bash tools/mutate.sh sessinit   # only the mutants listed in the file
#                                        # (lines as the survivor list prints them)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}

declare -A TARGETS=(
  [triggers]="core/src/trainbus/callbacks/trigger.py=tests/core/test_triggers.py"
  [registry]="core/src/trainbus/bus/registry.py=tests/core/test_registry.py"
  [fastrun]="core/src/trainbus/session/fastrun.py=tests/core/test_hot_path.py"
  [param]="plugins/param/src/trainbus_param/_setters.py=plugins/param/tests"
  [saver]="plugins/saver/src/trainbus_saver/_saver.py=plugins/saver/tests"
  [earlystopping]="plugins/misc/src/trainbus_misc/_misc.py:EarlyStopping=plugins/misc/tests#early_stopping"
  # the SIGKILL timing test is left out: slow, and not deterministic about what it catches
  [jsonwriter]="plugins/monitor-json/src/trainbus_monitor_json/__init__.py=plugins/monitor-json/tests#not sigkill"
  [sessinit]="plugins/sessinit/src/trainbus_sessinit/_restore.py=plugins/sessinit/tests"
  [smartinit]="plugins/sessinit/src/trainbus_sessinit/_smart.py=plugins/sessinit/tests"
)
ORDER=(fastrun earlystopping jsonwriter param triggers registry saver sessinit smartinit)

if [[ $# -gt 0 ]]; then
  ORDER=("$@")
fi
args=()
for name in "${ORDER[@]}"; do
  if [[ -z "${TARGETS[$name]:-}" ]]; then
    echo "mutate.sh: unknown target '$name'; known: ${!TARGETS[*]}" >&2
    exit 2
  fi
  args+=("${TARGETS[$name]}")
done
only=()
if [[ -n "${MUTATE_ONLY:-}" ]]; then
  only=(--only "$MUTATE_ONLY")
fi
exec "$PY" tools/mutate.py --max "${MUTATE_MAX:-0}" "${only[@]}" "${args[@]}"
