#!/usr/bin/env bash
# Installs the real smallpond into the workloads' cached virtual environment, by package name
# and only when missing: smallpond 0.15.0 with duckdb below 1.5 (it breaks with 1.5). An
# environment of its own, because smallpond pins pyarrow 16 and the Python package's
# environment has a newer one.
#
#   bash scripts/workloads-env.sh [VENV]  # default: $T3FS_WORKLOADS_VENV or ~/.cache/t3fs/workloads-venv
set -euo pipefail
VENV=${1:-${T3FS_WORKLOADS_VENV:-$HOME/.cache/t3fs/workloads-venv}}
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating the workloads' Python environment $VENV"
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -m pip show -q smallpond >/dev/null 2>&1 \
  || ! "$VENV/bin/python" -m pip show -q duckdb >/dev/null 2>&1; then
  echo "installing into $VENV: smallpond==0.15.0 duckdb<1.5"
  "$VENV/bin/python" -m pip install -q "smallpond==0.15.0" "duckdb<1.5"
fi
