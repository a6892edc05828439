#!/usr/bin/env bash
# Makes the folder that tests/executor/device_run.sh and device_perf.sh run on a CUDA GPU
# machine: UCX 1.13.1 (Debian 12's source) built with CUDA support, this tree's
# libfast_executor, exec_cuda_test and alltoallv_device_perf built with -Dcuda=enabled against
# it, and the CUDA runtime, relocatable, about 5 MB. The GPU machine then needs only its driver
# (the stage was run on an H200 and an H100 with driver 580).
#
# --newer-ucx: also UCX 1.18.1 (the source package of Debian 13, "trixie"), built the same way,
# with this tree built against it into STAGE_DIR/ucx-1.18.1, itself a complete stage (bin/,
# lib/), so that the device scripts can compare the two UCX versions on one machine.
#
# Why build UCX: Debian's libucx has no CUDA transports. UCX's CUDA transport needs nvml.h,
# which comes from Debian's non-free libnvidia-ml-dev. Both are fetched through apt with the
# sources given on the command line (nothing is added to the system's lists). Needs Debian 12
# as root with nvcc in /usr/local/cuda, and the packages of scripts/dev.
#   device_stage.sh [--newer-ucx] STAGE_DIR [WORK_DIR]    (WORK_DIR: where UCX is built,
#                                                          /tmp/fast-device-stage)
set -euo pipefail
usage="usage: device_stage.sh [--newer-ucx] STAGE_DIR [WORK_DIR]"
newer=0
if [[ ${1:-} == --newer-ucx ]]; then newer=1; shift; fi
[[ ${1:-} == -h || ${1:-} == --help ]] && { echo "$usage"; exit 0; }
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
stage=${1:?$usage}
work=${2:-/tmp/fast-device-stage}
cuda=/usr/local/cuda
[[ -x $cuda/bin/nvcc ]] || { echo "device_stage.sh: no nvcc in $cuda/bin" >&2; exit 1; }
mkdir -p "$work/apt/lists/partial" "$stage"
stage=$(cd "$stage" && pwd)
cd "$work"
trap 'echo "device_stage.sh: failed; the logs are in $work (autogen-*.log, configure-*.log, make-*.log)" >&2' ERR

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
  echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main"
  echo "deb [signed-by=$keyring] http://deb.debian.org/debian bookworm contrib non-free"
  if ((newer)); then echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian trixie main"; fi
} >apt/sources.list
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
echo "device_stage.sh: fetching UCX's source and nvml.h" >&2
apt-get "${apt_opts[@]}" update -qq
[[ -f ucx_1.13.1.orig.tar.xz ]] || apt-get "${apt_opts[@]}" source --download-only -qq ucx=1.13.1-1
if ((newer)) && [[ ! -f ucx_1.18.1+ds.orig.tar.xz ]]; then
  apt-get "${apt_opts[@]}" source --download-only -qq ucx=1.18.1+ds-2 ||
    { echo "device_stage.sh: cannot fetch UCX 1.18.1's source (trixie's ucx=1.18.1+ds-2; see apt-get's error above)" >&2; exit 1; }
fi
ls libnvidia-ml-dev_*.deb libnvidia-ml1_*.deb >/dev/null 2>&1 ||
  apt-get "${apt_opts[@]}" download -qq libnvidia-ml-dev libnvidia-ml1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends autoconf automake libtool make >/dev/null
rm -rf nvml && mkdir nvml
for deb in libnvidia-ml-dev_*.deb libnvidia-ml1_*.deb; do dpkg -x "$deb" nvml; done

# build_ucx VERSION TARBALL PREFIX: UCX's libraries, CUDA modules and ucx_info into PREFIX.
build_ucx() {
  local version=$1 tarball=$2 prefix=$3 dir
  [[ -f $prefix/lib/pkgconfig/ucx.pc ]] && return 0
  echo "device_stage.sh: building UCX $version with CUDA (a few minutes)" >&2
  dir=$(tar tf "$tarball" | sed -n '1s|/.*||p') # reads the whole listing: no SIGPIPE under pipefail
  rm -rf "$dir" && tar xf "$tarball"
  (
    cd "$dir"
    # configure.ac lists files under debian/, which Debian's tarball ships as debian.upstream.
    [[ -d debian || ! -d debian.upstream ]] || cp -r debian.upstream debian
    ./autogen.sh >"$work/autogen-$version.log" 2>&1
    ./configure --prefix="$prefix" --with-cuda="$cuda" --enable-mt --disable-numa --disable-doxygen-doc \
      --without-java --without-go --without-rocm --without-verbs --without-rdmacm --without-knem \
      --without-xpmem --without-ugni --without-fuse3 --without-gdrcopy \
      CPPFLAGS="-I$work/nvml/usr/include" LDFLAGS="-L$work/nvml/usr/lib/x86_64-linux-gnu/nvidia/current" \
      >"$work/configure-$version.log" 2>&1
    grep -q "UCT modules:.*cuda" "$work/configure-$version.log" ||
      { echo "device_stage.sh: UCX $version found no CUDA ($work/configure-$version.log)" >&2; exit 1; }
    # The libraries, their modules and ucx_info only: UCX's test programs use cuCtxCreate's
    # pre-CUDA-13 signature and do not build with CUDA 13.
    for sub in src/ucm src/ucs src/uct src/ucp src/tools/info; do
      make -j"$(nproc)" -C "$sub" >>"$work/make-$version.log" 2>&1
      make -C "$sub" install >>"$work/make-$version.log" 2>&1
    done
    make install-pkgconfigDATA >>"$work/make-$version.log" 2>&1
  )
}

# build_tree PREFIX BUILD: this tree's executor and device programs against the UCX in PREFIX.
build_tree() {
  local prefix=$1 build=$2 stamp="$source_dir, benchmarks enabled"
  # A build folder belongs to one source tree and these options: another is set up afresh.
  [[ -f $build/.fast-source && $(cat "$build/.fast-source") == "$stamp" ]] || rm -rf "$build"
  if [[ ! -f $build/build.ninja ]]; then
    PATH=$cuda/bin:$PATH PKG_CONFIG_PATH=$prefix/lib/pkgconfig \
      meson setup "$build" "$source_dir" --buildtype=release -Dcuda=enabled -Dbenchmarks=auto >/dev/null
    echo "$stamp" >"$build/.fast-source"
  fi
  PATH=$cuda/bin:$PATH ninja -C "$build" tests/executor/exec_cuda_test benchmarks/alltoallv_device_perf >/dev/null
}

# stage_into DEST PREFIX BUILD: real files, not links (the folder may travel where links do not).
stage_into() {
  local dest=$1 prefix=$2 build=$3 cudart module
  rm -rf "$dest/bin" "$dest/lib"
  mkdir -p "$dest/bin" "$dest/lib/ucx"
  cp -L "$prefix"/lib/lib{ucp,ucs,uct,ucm}.so.0 "$dest/lib/"
  [[ ! -e $prefix/lib/libucs_signal.so.0 ]] || cp -L "$prefix/lib/libucs_signal.so.0" "$dest/lib/"
  for module in "$prefix"/lib/ucx/*.so.0; do cp -L "$module" "$dest/lib/ucx/"; done
  cudart=$(ldd "$build/tests/executor/exec_cuda_test" | awk '/libcudart/ { print $3 }')
  [[ -f $cudart ]] || { echo "device_stage.sh: exec_cuda_test links no CUDA runtime found on this machine" >&2; exit 1; }
  cp -L "$cudart" "$build/executor/libfast_executor.so.0" "$dest/lib/"
  cp "$prefix/bin/ucx_info" "$build/tests/executor/exec_cuda_test" "$build/benchmarks/alltoallv_device_perf" "$dest/bin/"
  strip --strip-unneeded "$dest"/lib/*.so.* "$dest"/lib/ucx/*.so.* "$dest"/bin/*
}

build_ucx 1.13.1 ucx_1.13.1.orig.tar.xz "$work/ucx"
echo "device_stage.sh: building libfast_executor, exec_cuda_test and alltoallv_device_perf with CUDA" >&2
build_tree "$work/ucx" "$work/build-cuda"
stage_into "$stage" "$work/ucx" "$work/build-cuda"
rm -rf "$stage/ucx-1.18.1"
if ((newer)); then
  build_ucx 1.18.1 ucx_1.18.1+ds.orig.tar.xz "$work/ucx-1.18.1"
  echo "device_stage.sh: building the tree again against UCX 1.18.1" >&2
  build_tree "$work/ucx-1.18.1" "$work/build-cuda-1.18.1"
  stage_into "$stage/ucx-1.18.1" "$work/ucx-1.18.1" "$work/build-cuda-1.18.1"
fi
du -sh "$stage"
