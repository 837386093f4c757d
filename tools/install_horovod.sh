#!/usr/bin/env bash
# Build (once per machine) and install horovod 0.28.1 with Gloo into the given Python environment.
#
# horovod 0.28.1 does not build against TensorFlow 2.21 as released: its XLA source file needs XLA
# headers the TF wheel does not ship. XLA ops are opt-in and GPU-only, so we drop that one source
# from the CMake list, build a wheel with Gloo (no MPI), cache it keyed by the TF version, and
# install it. Later runs on the same machine reuse the cached wheel (seconds, not ten minutes).
#
# usage: tools/install_horovod.sh PYTHON
set -euo pipefail
PY=${1:?usage: install_horovod.sh PATH/TO/python}
HVD_VERSION=0.28.1
if "$PY" -c "import horovod.tensorflow as h, horovod; assert horovod.__version__ == '$HVD_VERSION'" 2>/dev/null; then
  echo "horovod $HVD_VERSION already installed"; exit 0
fi
TF_VERSION=$("$PY" -c "import tensorflow as tf; print(tf.__version__)" 2>/dev/null) || {
  echo "install_horovod.sh: TensorFlow is not importable from $PY; install tensorflow-cpu first" >&2; exit 1; }
CACHE=${TRAINBUS_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainbus/wheels}/horovod-$HVD_VERSION-tf$TF_VERSION
mkdir -p "$CACHE"
WHEEL=$(ls "$CACHE"/horovod-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$WHEEL" ]; then
  echo "building horovod $HVD_VERSION for TF $TF_VERSION (about 10 minutes on 2 cores; cached in $CACHE)"
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  "$PY" -m pip download --no-deps --no-binary :all: "horovod==$HVD_VERSION" -d "$WORK" >/dev/null
  tar -xzf "$WORK/horovod-$HVD_VERSION.tar.gz" -C "$WORK"
  SRC="$WORK/horovod-$HVD_VERSION"
  # the one-line build fix: no XLA op source (needs headers TF 2.21 does not ship)
  sed -i '/xla_mpi_ops\.cc/d' "$SRC/horovod/tensorflow/CMakeLists.txt"
  "$PY" -m pip install -q cmake packaging wheel setuptools >/dev/null
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
  HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip wheel --no-deps --no-build-isolation -w "$WORK/dist" "$SRC"
  cp "$WORK"/dist/horovod-*.whl "$CACHE/"
  WHEEL=$(ls "$CACHE"/horovod-*.whl | head -n1)
fi
"$PY" -m pip install -q --no-deps "$WHEEL"
# horovod's runtime dependencies (without touching TensorFlow)
"$PY" -m pip install -q cloudpickle psutil pyyaml packaging
"$PY" -c "import horovod.tensorflow as hvd; print('horovod', hvd.__version__ if hasattr(hvd,'__version__') else '$HVD_VERSION', 'gloo built:', hvd.gloo_built())"
