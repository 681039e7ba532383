#!/usr/bin/env bash
# Every Python environment the tests use, installed in one go (each by package name, only what
# is missing): the Python package's (scripts/py-env.sh), DLIO's requirements in the same
# environment (scripts/dlio-env.sh), and smallpond's (scripts/workloads-env.sh). The installs
# only download and unpack, so scripts/test.sh runs this in the background while cargo builds
# (on a fresh machine they took some 240 s); one after another, because two pips must not
# write one environment at once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/py-env.sh
bash scripts/dlio-env.sh
bash scripts/workloads-env.sh
echo "Python environments ready"
