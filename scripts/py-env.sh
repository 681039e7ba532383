#!/usr/bin/env bash
# Installs what the Python package's tests need into its cached virtual environment, by package
# name and only what is missing: maturin (the package's build backend), fsspec and pytest, and
# torch, lightning, pandas and pyarrow for the dataset, checkpoint and fsspec tests. torch from
# PyPI brings its CUDA wheels (about 3 GB) and then runs on the CPU. Installs nothing of the
# package itself (scripts/python-tests.sh does, with `pip install ./python`).
#
#   bash scripts/py-env.sh [VENV]    # default: $T3FS_PY_VENV or ~/.cache/t3fs/py-venv
set -euo pipefail
VENV=${1:-${T3FS_PY_VENV:-$HOME/.cache/t3fs/py-venv}}
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating the Python environment $VENV"
  python3 -m venv "$VENV"
fi
missing=()
for p in maturin fsspec pytest torch lightning pandas pyarrow; do
  "$VENV/bin/python" -m pip show -q "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing into $VENV: ${missing[*]}"
  "$VENV/bin/python" -m pip install -q "${missing[@]}"
fi
