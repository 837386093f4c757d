#!/usr/bin/env bash
# Set up the development environment (.venv) from scratch, then run a job.
#
#   tools/bootstrap.sh example   # core + every plugin, then train the example (the main job)
#   tools/bootstrap.sh test      # + test tools and horovod (built once per machine), then the whole suite
#   tools/bootstrap.sh setup     # only set up (everything, as for `test`)
#
# Needs Python 3.11 with pip and venv (PYTHON=... to choose the interpreter). Idempotent:
# rerunning skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
JOB=${1:-setup}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=${TRAINBUS_VENV:-.venv}
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV with $("$PY" --version)"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
# pip's own exit status counts (pipefail); only the machine's "Location ... is ignored" noise is dropped
pipq() { "$VPY" -m pip install -q "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }; }
echo "== installing TensorFlow and the build tools"
pipq --upgrade "pip>=23" "setuptools>=77" wheel
pipq "tensorflow-cpu==2.21.0"
plugins=()
for d in plugins/*/; do
  [ -f "$d/pyproject.toml" ] || continue
  if [ "$JOB" = "example" ]; then
    # the main job needs no distributed engine nor the opt-in heavy monitor backends
    case "$d" in plugins/trainers-horovod/|plugins/monitor-comet/|plugins/monitor-mlflow/|plugins/monitor-wandb/) continue ;; esac
  fi
  plugins+=(-e "$d")
done
if [ "$JOB" != "example" ]; then
  echo "== installing the test and docs tools"
  pipq -r tools/requirements-test.txt
  # tf-keras requires the `tensorflow` distribution, whose wheel (the CUDA build) unpacks over the
  # same `tensorflow/` package as tensorflow-cpu: put the CPU build's files back (oneDNN kernels,
  # e.g. NCHW convolutions on the CPU), keeping both distributions' metadata
  pipq --force-reinstall --no-deps "tensorflow-cpu==2.21.0"
  echo "== installing horovod (built once per machine, then cached)"
  tools/install_horovod.sh "$VPY"
fi
# a distribution this checkout no longer has, left in an older .venv (its SimpleTrainer and
# NoOpTrainer are the core's now): `trainbus plugins` would report its missing module
"$VPY" -m pip uninstall -q -y trainbus-trainers-single 2>/dev/null || true
echo "== installing trainbus (core) and the plugins under plugins/ (editable)"
pipq --no-build-isolation -e core "${plugins[@]}"
# Keras imports scikit-learn, matplotlib.pyplot, scipy and OpenCV during every `import tensorflow`
# when they are importable (~0.6 s, ~0.6 s, ~0.25 s, ~0.12 s per process): none is in the venv's
# site-packages (an older .venv loses them here; OpenCV and scipy are trainbus-dataflow's extras
# [image] and [mat]). The tests that need them put their folder under .venv/opt/ on their path.
"$VPY" -m pip uninstall -q -y scikit-learn matplotlib scipy opencv-python-headless 2>/dev/null || true
# opt NAME IMPORT REQUIREMENT...: install into $VENV/opt/NAME with --no-deps (the requirements
# listed are all it needs beside what the venv has, numpy, pillow, packaging, and the folders named
# in $OPT_WITH), check it imports
opt() {
  local name=$1 check=$2; shift 2
  local path="$VENV/opt/$name${OPT_WITH:+:$OPT_WITH}"
  if ! PYTHONPATH="$path" "$VPY" -c "import $check" 2>/dev/null; then
    pipq --no-deps --upgrade --target "$VENV/opt/$name" "$@"
    PYTHONPATH="$path" "$VPY" -c "import $check"
  fi
}
if [ "$JOB" != "example" ]; then
  # trainbus-dataflow's extras, for the tests of imgaug, the image dataflows and datasets
  # (fixture opencv_importable) and of the .mat readers (fixture scipy_importable)
  opt image cv2 "opencv-python-headless>=4.8"
  opt mat scipy.io "scipy>=1.10"
  # SVMLightData's reader (plugins/dataflow/tests: fixture sklearn_importable), on top of scipy
  OPT_WITH="$VENV/opt/mat" opt sklearn sklearn.datasets "scikit-learn>=1.3" "joblib>=1.4" "threadpoolctl>=3.5" "narwhals>=2.0.1"
  # `trainbus show --plot` and utils.viz.intensity_to_rgb (fixture matplotlib_importable)
  opt plot matplotlib.pyplot "matplotlib>=3.7" "contourpy>=1.0.1" "cycler>=0.10" "fonttools>=4.22" \
    "kiwisolver>=1.3.1" "pyparsing>=3" "python-dateutil>=2.7" "six>=1.5"
fi
case "$JOB" in
  example)
    exec "$VPY" examples/digits_convnet.py ;;
  test)
    # tests/core with the core alone first (about a minute): no plugin distribution visible
    tools/test_core_alone.sh "$VPY"
    # three workers on two cores: a sixth of the tests' time is spent waiting on the processes,
    # servers and timeouts they start, and the third worker fills those idle moments
    exec "$VPY" -m pytest -n 3 --dist loadfile ;;
  setup)
    echo "== ready: $VPY" ;;
  *)
    echo "unknown job $JOB (example|test|setup)" >&2; exit 2 ;;
esac
