#!/usr/bin/env bash
# The Python package's tests (python/): builds and installs the package with pip into a cached
# virtual environment, starts nothing itself (the tests start a real cluster with the release
# binary and stop it, pass or fail), and runs fsspec's abstract suite and the package's tests.
# Its Python packages are checked by name and installed only when missing (scripts/py-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${T3FS_PY_VENV:-$HOME/.cache/t3fs/py-venv}
bash scripts/py-env.sh "$VENV"

# maturin's build backend runs the `maturin` program, which the environment's bin holds.
export PATH="$VENV/bin:$PATH"

# The package as a user installs it (`pip install ./python`), built by maturin in release into
# a target folder of its own (the extension is its own cargo workspace).
echo "pip install ./python"
CARGO_TARGET_DIR=$PWD/target/python "$VENV/bin/python" -m pip install -q --no-build-isolation ./python

T3FS_BIN=${T3FS_BIN:-$PWD/target/release/t3fs}
[ -x "$T3FS_BIN" ] || cargo build --release --locked
export T3FS_BIN
# Run from python/tests so that `import t3fs` is the installed package, not the source folder.
cd python/tests
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -rs
