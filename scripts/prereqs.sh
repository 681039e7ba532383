#!/usr/bin/env bash
# Installs the Debian packages the tests need, checked by package name (dpkg-query), never by
# file globs: a glob once took the image's libclang-cpp14 for libclang-dev, and a fresh machine
# failed six minutes into the build. Sourced by scripts/test.sh; also runs on its own
# (`bash scripts/prereqs.sh`) and prints what it installed.
#
# Each package, and why the tests need it. The main job (`cargo run --release -- demo`) needs
# only the Rust toolchain and a C compiler.
set -euo pipefail

T3FS_PACKAGES=(
  ca-certificates  # cargo fetches crates over https
  gcc              # the linker driver rustc calls, and the cc crate (mimalloc, io-uring)
  libc6-dev        # crt objects and libc headers for linking
  pkg-config       # rdma-sys finds libibverbs and librdmacm through it
  libclang-dev     # rdma-sys generates its bindings with bindgen, which loads libclang.so
  libibverbs-dev   # the `rdma` feature's verbs headers and library
  librdmacm-dev    # the `rdma` feature's rdma_cm headers and library
  protobuf-compiler # etcd-client's build runs protoc
  libprotobuf-dev  # google/protobuf/{descriptor,struct}.proto that etcd-client's protos import
  etcd-server      # the etcd KV engine's conformance suite and the cluster-on-etcd test
  curl             # scripts/etcd.sh's health check
  git              # the report's commit stamp, and the mount's git section
  procps           # kill and ps: tests stop every process they started
  iproute2         # `ip netns` for the --hosts netns tests
  nftables         # kernel partition rules in those namespaces
  fuse3            # fusermount3 for the `t3fs mount` tests
  fio              # verified writes through the mount
  sqlite3          # a database on the mount
  python3          # a Python program on the mount; the Python package's tests
  python3-venv     # the cached virtual environment the Python package is installed into
  util-linux       # setpriv: requests on the mount from another user
  openmpi-bin      # mpirun for DLIO's simulated accelerators (scripts/dlio-test.sh)
  libopenmpi-dev   # the MPI library mpi4py (DLIO's) loads
)

# Packages of T3FS_PACKAGES that dpkg does not list as installed.
t3fs_missing_packages() {
  local p
  for p in "${T3FS_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
      || echo "$p"
  done
}

# Installs whatever is missing (as root, or through sudo); exits 2 naming the packages where it
# cannot.
t3fs_install_packages() {
  local need sudo=()
  mapfile -t need < <(t3fs_missing_packages)
  [ ${#need[@]} -eq 0 ] && return 0
  echo "== installing ${need[*]} (apt)"
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "error: missing Debian packages: ${need[*]}; neither root nor sudo is available" \
        "to install them (apt-get install ${need[*]})" >&2
      exit 2
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${need[@]}"
  mapfile -t need < <(t3fs_missing_packages)
  if [ ${#need[@]} -gt 0 ]; then
    echo "error: apt-get did not install ${need[*]}" >&2
    exit 2
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  t3fs_install_packages
  echo "all of ${#T3FS_PACKAGES[@]} packages installed"
fi
