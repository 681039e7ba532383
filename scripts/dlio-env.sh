#!/usr/bin/env bash
# Installs the real DLIO (dlio-benchmark 2.0.0, MLPerf Storage's harness) into a Python
# environment, by package name and only what is missing: dlio-benchmark itself with --no-deps
# (its requirements name nvidia-dali-cuda110, a placeholder on PyPI, and torchvision and
# torchaudio, which DLIO's readers here do not import), then its other requirements with
# tensorflow-cpu for tensorflow. torch comes from the environment (the Python package's tests
# install it; a new environment gets it here). Open MPI is Debian's (scripts/prereqs.sh).
# DLIO's TFRecord generator (resnet50, cosmoflow) runs `tfrecord2idx`, NVIDIA DALI's index
# tool; the `tfrecord` package has the same tool (`python -m tfrecord.tools.tfrecord2idx FILE
# INDEX`), which the environment's bin gets as `tfrecord2idx`.
#
#   bash scripts/dlio-env.sh [VENV]    # default: the Python package's cached environment
set -euo pipefail
VENV=${1:-${T3FS_PY_VENV:-$HOME/.cache/t3fs/py-venv}}
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating the Python environment $VENV"
  python3 -m venv "$VENV"
fi
have() { "$VENV/bin/python" -m pip show -q "$1" >/dev/null 2>&1; }
if ! have dlio-benchmark; then
  "$VENV/bin/python" -m pip install -q --no-deps "dlio-benchmark==2.0.0"
fi
# pip's resolver then reports dlio-benchmark's skipped requirements (DALI, torchvision,
# torchaudio, and `tensorflow`, which tensorflow-cpu provides) as conflicts; those lines are
# expected and dropped, anything else pip says is kept.
quiet_pip() {
  "$VENV/bin/python" -m pip "$@" 2>&1 \
    | grep -v -e "dependency resolver does not currently take into account" \
      -e "dlio-benchmark 2.0.0 requires" || true
  "$VENV/bin/python" -m pip check 2>/dev/null | grep -v "^dlio-benchmark 2.0.0 requires" || true
}
need=()
for spec in "Pillow>=9.3.0" "PyYAML>=6.0.0" "h5py>=3.11.0" "mpi4py>=3.1.4" "numpy>=1.23.5" \
  "omegaconf>=2.2.0" "pandas>=1.5.1" "psutil>=5.9.8" "pydftracer==1.0.2" "hydra-core>=1.3.2" \
  tensorflow-cpu "torch>=2.2.0" tfrecord; do
  name=${spec%%[<>=]*}
  have "$name" || need+=("$spec")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing into $VENV: ${need[*]}"
  quiet_pip install -q "${need[@]}"
fi
if [ ! -x "$VENV/bin/tfrecord2idx" ]; then
  printf '#!/bin/sh\n# DALI'"'"'s tfrecord2idx, as DLIO calls it, from the tfrecord package.\nexec "$(dirname "$0")/python" -m tfrecord.tools.tfrecord2idx "$@"\n' \
    >"$VENV/bin/tfrecord2idx"
  chmod +x "$VENV/bin/tfrecord2idx"
fi
for name in dlio-benchmark tensorflow-cpu torch mpi4py hydra-core tfrecord; do
  have "$name" || { echo "error: $name did not install into $VENV" >&2; exit 1; }
done
