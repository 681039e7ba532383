#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine, checks the
# workspace dependency rules, and runs every test. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: none are needed by the tests that exist today. The mgmtd/meta issues add
# etcd-server and protobuf-compiler, the FUSE issue fuse3/libfuse3-dev; they are installed here
# when those tests land.

if ! command -v cargo >/dev/null; then
  echo "error: cargo not found; install a Rust toolchain (rustup) first" >&2
  exit 2
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "cargo-nextest not found: installing it from crates.io"
  cargo install --locked cargo-nextest
fi

echo "== dependency rules (ARCHITECTURE.md)"
bash scripts/check-deps.sh

echo "== build"
cargo build --workspace --all-targets --locked

echo "== tests"
cargo nextest run --workspace --locked --no-fail-fast

echo "== model check (release binary, the command users run)"
cargo run --release --locked -- check craq
cargo run --release --locked -- check mgmtd

echo "== the main job and a swarm (release)"
cargo run --release --locked -- demo --out target/runs
cargo run --release --locked -- sim swarm --seeds 500
