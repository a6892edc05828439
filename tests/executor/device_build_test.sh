#!/usr/bin/env bash
# Compiles libfast_executor with device memory support (there is no GPU here, so compile only),
# with -Dwerror=true, and checks that asking for that memory gives a clear error status, not a
# crash: CUDA with nvcc from /usr/local/cuda (for sm_80 and sm_90), with the device run
# (exec_cuda_test) and the device benchmark (alltoallv_device_perf, its fill and check kernels
# compiled by nvcc) built and skipping, each then run on host memory; HIP with the HIP headers.
# Skipped (exit 77) where the toolkit is missing.
#   device_build_test.sh cuda|hip SOURCE_DIR BUILD_ROOT
set -euo pipefail
kind=$1
source_dir=$2
dir="$3/exec-device-build-$kind"
case "$kind" in
  cuda)
    [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "no nvcc at /usr/local/cuda/bin: skipped"; exit 77; }
    export PATH=/usr/local/cuda/bin:$PATH
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    ;;
  hip)
    [[ -f /usr/include/hip/hip_runtime_api.h || -f /opt/rocm/include/hip/hip_runtime_api.h ]] ||
      { echo "no HIP headers (libamdhip64-dev): skipped"; exit 77; }
    ;;
  *) echo "usage: device_build_test.sh cuda|hip SOURCE_DIR BUILD_ROOT"; exit 2 ;;
esac
# --reconfigure: a folder set up by an older version of this script (tests disabled) is brought
# up to these options.
meson setup $([[ -f "$dir/build.ninja" ]] && echo --reconfigure) "$dir" "$source_dir" -D"$kind"=enabled -Dwerror=true \
  -Dtests=auto -Dbenchmarks=auto >/dev/null
ninja -C "$dir" executor/libfast_executor.so.0.1.0 >/dev/null
if [[ $kind == cuda ]]; then
  # The device run (tests/executor/exec_cuda_test.cpp) must build too, and without a device
  # (or a CUDA-aware UCX) say so and skip rather than crash.
  ninja -C "$dir" tests/executor/exec_cuda_test >/dev/null
  rc=0
  UCX_TLS=sm,self,cuda_copy "$dir/tests/executor/exec_cuda_test" || rc=$?
  [[ $rc == 77 || $rc == 0 ]] || { echo "exec_cuda_test exited $rc"; exit 1; }
  # Its harness (ranks as processes over a file allgather) on host memory, which runs here.
  UCX_TLS=sm,self timeout -k 10 240 "$dir/tests/executor/exec_cuda_test" --host --processes --ranks 4 \
    --gpus-per-server 2 --mean 20000 --seeds 2
  # The device benchmark (tests/executor/device_perf.sh runs it on a GPU): skips without a
  # device, and its CUDA build runs on host memory, peaks and both modes included.
  ninja -C "$dir" benchmarks/alltoallv_device_perf >/dev/null
  rc=0
  UCX_TLS=sm,self "$dir/benchmarks/alltoallv_device_perf" --memory cuda --ranks 2 -g 1 || rc=$?
  [[ $rc == 77 || $rc == 0 ]] || { echo "alltoallv_device_perf exited $rc"; exit 1; }
  UCX_TLS=sm,self timeout -k 10 120 "$dir/benchmarks/alltoallv_device_perf" --memory host --ranks 4 -g 2 -b 40K \
    -w 0 -n 1 --modes processes,threads --peaks --limit 100
fi
probe="$dir/probe"
c++ -std=c++20 -Wall -Wextra -Werror -I"$source_dir/executor/include" -x c++ - -o "$probe" \
  -L"$dir/executor" -lfast_executor <<'CPP'
#include <fast/exec/exec.hpp>
#include <cstdio>
#include <cstring>
#include <string>
int main(int argc, char** argv) {
    const std::string kind = argc > 1 ? argv[1] : "";
    fast::exec::bootstrap boot{0, 1, [](const void* s, void* r, std::size_t n) {
                                   std::memcpy(r, s, n);
                                   return fast::exec::status{};
                               }};
    fast::exec::config cfg;
    cfg.memory = kind == "cuda" ? fast::exec::memory::cuda : fast::exec::memory::hip;
    fast::exec::communicator comm;
    const fast::exec::status st = fast::exec::create(boot, cfg, comm);
    std::printf("%s memory: %s: %s\n", kind.c_str(), std::string(fast::exec::to_string(st.code())).c_str(), st.message());
    // Without a device (or without device support in UCX) creation must fail cleanly; with
    // both, it succeeds. Either way host memory still works in the same process.
    if (!st.ok() && st.code() != fast::exec::errc::unsupported) return 1;
    fast::exec::communicator host;
    return fast::exec::create(boot, fast::exec::config{}, host).ok() ? 0 : 1;
}
CPP
UCX_TLS=sm,self LD_LIBRARY_PATH="$dir/executor${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$probe" "$kind"
