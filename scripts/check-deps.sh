#!/usr/bin/env bash
# Enforces the dependency rules of docs/ARCHITECTURE.md with `cargo tree`:
# - t3fs-core depends on no workspace crate and no async or OS crate;
# - t3fs-sim never depends on t3fs-services, t3fs-client or t3fs-real, nor they on t3fs-sim;
# - t3fs-services depends on neither t3fs-client nor t3fs-real (nor fuser); t3fs-client not on
#   t3fs-real;
# - t3fs-reports depends on no workspace crate; only the CLI depends on t3fs-crosscheck.
# - no import cycle between the folders of a crate beyond those in scripts/known-cycles.txt;
# - no production function over 80 lines beyond those in scripts/long-functions.txt (at most
#   10, each with its reason).
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
deps() { cargo tree --locked -p "$1" -e normal --prefix none --all-features | sed 's/ .*//' | sort -u; }

core=$(deps t3fs-core)
for banned in tokio mio io-uring socket2 t3fs-sim t3fs-services t3fs-client t3fs-real t3fs-scenario t3fs-reports; do
  if grep -qx "$banned" <<<"$core"; then echo "rule broken: t3fs-core depends on $banned"; fail=1; fi
done
sim=$(deps t3fs-sim)
for banned in t3fs-services t3fs-client t3fs-real; do
  if grep -qx "$banned" <<<"$sim"; then echo "rule broken: t3fs-sim depends on $banned"; fail=1; fi
done
for c in t3fs-services t3fs-client t3fs-real; do
  if grep -qx t3fs-sim <<<"$(deps $c)"; then echo "rule broken: $c depends on t3fs-sim"; fail=1; fi
done
# The layers of the real side: services know no client or lab; the client knows no lab.
services=$(deps t3fs-services)
for banned in t3fs-client t3fs-real fuser; do
  if grep -qx "$banned" <<<"$services"; then echo "rule broken: t3fs-services depends on $banned"; fail=1; fi
done
if grep -qx t3fs-real <<<"$(deps t3fs-client)"; then echo "rule broken: t3fs-client depends on t3fs-real"; fail=1; fi
# Only the CLI links crosscheck, the one crate that joins the simulator and the real side.
for c in t3fs-core t3fs-scenario t3fs-sim t3fs-services t3fs-client t3fs-real t3fs-reports; do
  if grep -qx t3fs-crosscheck <<<"$(deps $c)"; then echo "rule broken: $c depends on t3fs-crosscheck"; fail=1; fi
done
reports=$(deps t3fs-reports)
for banned in t3fs-core t3fs-sim t3fs-services t3fs-client t3fs-real t3fs-scenario; do
  if grep -qx "$banned" <<<"$reports"; then echo "rule broken: t3fs-reports depends on $banned"; fail=1; fi
done
# Import cycles between the folders of each crate: none may be added (scripts/known-cycles.txt
# lists today's, and may only shrink); the self-test shows a planted cycle is caught.
python3 scripts/module_cycles.py --self-test || fail=1
python3 scripts/module_cycles.py || fail=1
# Function length: the self-test shows a planted long function is caught.
python3 scripts/long_functions.py --self-test || fail=1
python3 scripts/long_functions.py || fail=1
if [ "$fail" -ne 0 ]; then exit 1; fi
echo "dependency rules hold"
