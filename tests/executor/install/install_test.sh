#!/usr/bin/env bash
# `meson install` into a scratch root; then programs outside the tree, built only against the
# installed headers and `pkg-config fast-executor` (a plain C++ compiler for the core API, mpicxx
# for the MPI part), run: one rank without MPI, and a skewed alltoallv on 8 ranks as 2 servers;
# and an ordinary MPI program linked by `pkg-config fast-mpi` (libfast_mpi, when built).
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

# libfast_mpi (when built): fast-mpi.pc links an ordinary MPI program (tests/mpi's) to it, its
# all-to-alls go FAST, and the library finds libfast_executor beside it (RUNPATH $ORIGIN), so
# LD_PRELOAD needs its path alone.
mpi_pc=$(find "$root" -name fast-mpi.pc | head -n 1)
if [[ -n "$mpi_pc" ]]; then
  sed -i "s|^prefix=.*|prefix=$root$prefix|" "$mpi_pc"
  cc=gcc
  [[ "$cxx" == *clang* ]] && cc=clang
  echo "pkg-config --libs fast-mpi: $(pkg-config --libs fast-mpi)"
  c_extra=("${extra[@]}")
  [[ "$sanitize" == none ]] || c_extra+=(-fsanitize-link-c++-runtime -lstdc++) # the library is C++
  OMPI_CC=$cc mpicc -std=c99 "${c_extra[@]}" "$source_dir/tests/mpi/alltoall_cases.c" $(pkg-config --libs fast-mpi) -o "$root/mpi_program"
  readelf -d "$root/mpi_program" | grep -q 'NEEDED.*libfast_mpi' || { echo "mpi_program does not load libfast_mpi"; exit 1; }
  readelf -d "$(pkg-config --variable=libdir fast-mpi)/libfast_mpi.so" | grep -q 'RUNPATH.*\$ORIGIN' ||
    { echo "the installed libfast_mpi.so has no RUNPATH \$ORIGIN"; exit 1; }
  mkdir "$root/out"
  out=$(FAST_MPI_SUMMARY=1 FAST_MPI_GPUS_PER_SERVER=2 "$mpirun_sh" --tls sm --timeout 120 -np 4 "$root/mpi_program" "$root/out" v_int 2>&1)
  echo "$out" | grep "fast_mpi: MPI_Alltoallv"
  grep -qE '^fast_mpi: MPI_Alltoallv +4 +4 ' <<<"$out" || { echo "$out"; echo "the linked program's MPI_Alltoallv did not go FAST"; exit 1; }
fi
