#!/usr/bin/env bash
# `meson install` into a scratch root; then programs outside the tree, built only against the
# installed headers and `pkg-config fast-executor` (a plain C++ compiler for the core API, mpicxx
# for the MPI part), run: one rank without MPI, and a skewed alltoallv on 8 ranks as 2 servers.
#   install_test.sh BUILD_DIR SOURCE_DIR MPIRUN_SH [CXX [SANITIZE]]
# CXX and SANITIZE (meson's b_sanitize) are the build's: a sanitized library needs consumers
# built by the same compiler with the same sanitizers.
set -euo pipefail
build_dir=$1
source_dir=$2
mpirun_sh=$3
cxx=${4:-c++}
sanitize=${5:-none}
extra=()
[[ "$sanitize" == none ]] || extra=(-fsanitize="$sanitize")
here="$source_dir/tests/executor/install"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build_dir" --no-rebuild --destdir "$root" >/dev/null
pc=$(find "$root" -name fast-executor.pc | head -n 1)
[[ -n "$pc" ]] || { echo "fast-executor.pc was not installed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed -i "s|^prefix=.*|prefix=$root$prefix|" "$pc"
export PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags fast-executor)
libs=$(pkg-config --libs fast-executor)
echo "pkg-config --cflags --libs fast-executor: $cflags $libs"
[[ -f "$(pkg-config --variable=includedir fast-executor)/fast/exec/mpi.hpp" ]] || { echo "fast/exec/mpi.hpp not installed"; exit 1; }
"$cxx" -std=c++20 -Wall -Wextra -Werror "${extra[@]}" $cflags "$here/core_consumer.cpp" $libs -o "$root/core_consumer"
OMPI_CXX="$cxx" mpicxx -std=c++20 -Wall -Wextra -DOMPI_SKIP_MPICXX "${extra[@]}" $cflags "$here/mpi_consumer.cpp" $libs -o "$root/mpi_consumer"
export LD_LIBRARY_PATH="$(pkg-config --variable=libdir fast-executor)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
UCX_TLS=sm,self UCX_NET_DEVICES=lo "$root/core_consumer"
"$mpirun_sh" --tls sm --timeout 120 -np 8 "$root/mpi_consumer" 4
