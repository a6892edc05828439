#!/usr/bin/env bash
# Makes the folder that tests/executor/device_run.sh, device_perf.sh and device_session.sh run
# on a CUDA GPU machine, with this tree built against two UCX versions so that one device
# session compares them:
#   STAGE/ucx-1.13.1  UCX 1.13.1 (Debian 12's source) built here with CUDA support;
#   STAGE/ucx-1.22.0  UCX 1.22.0 from PyPI's wheel (scripts/ucx-wheel), libucx-cu13 for the
#                     CUDA 13 toolkit here (libucx-cu12 where nvcc is 12): the wheel's CUDA
#                     modules then bring the same CUDA major version as the programs.
# Each is complete by itself: bin/ (exec_cuda_test and alltoallv_device_perf built with
# -Dcuda=enabled against that UCX, and UCX's ucx_info) and lib/ (libfast_executor, UCX's
# libraries and the modules UCX loads from lib/ucx, the CUDA runtime), stripped. Every program
# and library finds the others through its RUNPATH ($ORIGIN/../lib, $ORIGIN, $ORIGIN/..), so the
# stage can be moved anywhere and never loads a system UCX; this is checked before the script
# ends. The GPU machine then needs only its driver (libcuda, libnvidia-ml; 580 or later for
# CUDA 13). Prints the stage's size, which must stay under the device tool's 64 MiB.
#
# Why build UCX 1.13.1: Debian's libucx has no CUDA transports. UCX's CUDA transport needs
# nvml.h, which comes from Debian's non-free libnvidia-ml-dev. Both are fetched through apt with
# the sources given on the command line (nothing is added to the system's lists). Needs Debian 12
# as root with nvcc in /usr/local/cuda, the packages of scripts/dev, and PyPI for the wheel.
#   device_stage.sh STAGE_DIR [WORK_DIR]    (WORK_DIR: where UCX and the trees are built,
#                                            /tmp/fast-device-stage)
set -euo pipefail
usage="usage: device_stage.sh STAGE_DIR [WORK_DIR]"
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ $# -ge 1 && $# -le 2 && ${1:0:1} != - ]] || { echo "$usage" >&2; exit 2; }
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
source "$source_dir/tests/executor/device_common.sh"
stage=$1
work=${2:-/tmp/fast-device-stage}
cuda=/usr/local/cuda
[[ -x $cuda/bin/nvcc ]] || { echo "device_stage.sh: no nvcc in $cuda/bin" >&2; exit 1; }
cuda_major=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
[[ $cuda_major == 12 || $cuda_major == 13 ]] ||
  { echo "device_stage.sh: nvcc is CUDA '$cuda_major'; the UCX wheels exist for CUDA 12 and 13" >&2; exit 1; }
mkdir -p "$work/apt/lists/partial" "$stage"
stage=$(cd "$stage" && pwd)
work=$(cd "$work" && pwd)
cd "$work"
trap 'echo "device_stage.sh: failed; the logs are in $work (autogen-*.log, configure-*.log, make-*.log)" >&2' ERR

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  autoconf automake libtool make patchelf python3-venv >/dev/null
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
  echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main"
  echo "deb [signed-by=$keyring] http://deb.debian.org/debian bookworm contrib non-free"
} >apt/sources.list
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
if [[ ! -f ucx_1.13.1.orig.tar.xz ]] || ! ls libnvidia-ml-dev_*.deb libnvidia-ml1_*.deb >/dev/null 2>&1; then
  echo "device_stage.sh: fetching UCX 1.13.1's source and nvml.h" >&2
  timeout 300 apt-get "${apt_opts[@]}" update -qq
  [[ -f ucx_1.13.1.orig.tar.xz ]] || timeout 300 apt-get "${apt_opts[@]}" source --download-only -qq ucx=1.13.1-1
  ls libnvidia-ml-dev_*.deb libnvidia-ml1_*.deb >/dev/null 2>&1 ||
    timeout 300 apt-get "${apt_opts[@]}" download -qq libnvidia-ml-dev libnvidia-ml1
fi
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

# build_tree PKG_CONFIG_DIR BUILD: this tree's executor and device programs against the UCX
# whose ucx.pc is in PKG_CONFIG_DIR.
build_tree() {
  local pc_dir=$1 build=$2 stamp="$source_dir, benchmarks enabled, UCX from $1"
  # A build folder belongs to one source tree, one UCX and these options: another is set up afresh.
  [[ -f $build/.fast-source && $(cat "$build/.fast-source") == "$stamp" ]] || rm -rf "$build"
  if [[ ! -f $build/build.ninja ]]; then
    PATH=$cuda/bin:$PATH meson setup "$build" "$source_dir" --buildtype=release -Dcuda=enabled -Dbenchmarks=auto \
      -Dtorch=disabled -Dpkg_config_path="$pc_dir" >/dev/null
    echo "$stamp" >"$build/.fast-source"
  fi
  PATH=$cuda/bin:$PATH ninja -C "$build" tests/executor/exec_cuda_test benchmarks/alltoallv_device_perf >/dev/null
}

# stage_into DEST PREFIX BUILD VERSION: real files, not links (the folder may travel where links
# do not), with RUNPATHs inside DEST, checked.
stage_into() {
  local dest=$1 prefix=$2 build=$3 version=$4 cudart module f
  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib/ucx"
  cp -L "$prefix"/lib/lib{ucp,ucs,uct,ucm}.so.0 "$dest/lib/"
  [[ ! -e $prefix/lib/libucs_signal.so.0 ]] || cp -L "$prefix/lib/libucs_signal.so.0" "$dest/lib/"
  # UCX's transport and memory modules; not the wheel's perftest module (10 MB, for ucx_perftest).
  for module in "$prefix"/lib/ucx/*.so.0; do
    [[ $module == */libucx_perftest* ]] || cp -L "$module" "$dest/lib/ucx/"
  done
  # The wheel's libucm_cuda needs the CUDA runtime the wheel bundles (auditwheel renamed it,
  # libcudart-HASH.so.*, beside the package): it goes into lib/ with the modules' RUNPATH there.
  for f in $(readelf -d "$dest"/lib/ucx/*.so.0 | sed -n 's/.*NEEDED.*\[\(libcudart-[^]]*\)\].*/\1/p' | sort -u); do
    cp -L "$(dirname "$prefix")/libucx_cu$cuda_major.libs/$f" "$dest/lib/" ||
      { echo "device_stage.sh: the wheel's modules need $f, which the wheel does not hold" >&2; exit 1; }
  done
  cudart=$(ldd "$build/tests/executor/exec_cuda_test" | awk '/libcudart/ { print $3 }')
  [[ -f $cudart ]] || { echo "device_stage.sh: exec_cuda_test links no CUDA runtime found on this machine" >&2; exit 1; }
  cp -L "$cudart" "$build/executor/libfast_executor.so.0" "$dest/lib/"
  cp "$prefix/bin/ucx_info" "$build/tests/executor/exec_cuda_test" "$build/benchmarks/alltoallv_device_perf" "$dest/bin/"
  strip --strip-unneeded "$dest"/lib/*.so.* "$dest"/lib/ucx/*.so.* "$dest"/bin/*
  # Build RUNPATHs (meson's, the wheel's build machine) would point outside the stage.
  for f in "$dest"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
  for f in "$dest"/lib/*.so.*; do patchelf --set-rpath '$ORIGIN' "$f"; done
  for f in "$dest"/lib/ucx/*.so.*; do patchelf --set-rpath '$ORIGIN/..' "$f"; done
  check_stage "$dest" "$version"
}

# check_stage DEST VERSION: without LD_LIBRARY_PATH, every UCX, CUDA runtime and executor library
# that a program or module of DEST needs resolves inside DEST (not to Debian's libucx, which is
# installed here), and ucx_info runs UCX VERSION. The driver's libcuda and libnvidia-ml may be
# missing here.
check_stage() {
  local dest=$1 version=$2 f bad loaded
  for f in "$dest"/bin/* "$dest"/lib/*.so.* "$dest"/lib/ucx/*.so.*; do
    bad=$(unset LD_LIBRARY_PATH; loads_outside "$dest" "$f")
    [[ -z $bad ]] || { echo "device_stage.sh: $f loads from outside the stage: $(tr '\n' ' ' <<<"$bad")" >&2; exit 1; }
  done
  loaded=$(unset LD_LIBRARY_PATH; ucx_version "$dest")
  [[ $loaded == "$version" ]] || { echo "device_stage.sh: $dest/bin/ucx_info runs UCX '$loaded', not $version" >&2; exit 1; }
}

build_ucx 1.13.1 ucx_1.13.1.orig.tar.xz "$work/ucx"
echo "device_stage.sh: UCX from PyPI's wheel libucx-cu$cuda_major (the CUDA $cuda_major of nvcc here)" >&2
wheel_prefix=$("$source_dir/scripts/ucx-wheel" --cuda "$cuda_major" "$work/ucx-wheel")
wheel_version=$(PKG_CONFIG_PATH=$work/ucx-wheel/pkgconfig pkg-config --modversion ucx)

# Earlier layouts: UCX 1.13.1 at the top (bin/, lib/), or another UCX's folder.
rm -rf "$stage/bin" "$stage/lib" "$stage"/ucx-*
echo "device_stage.sh: building libfast_executor, exec_cuda_test and alltoallv_device_perf with CUDA against UCX 1.13.1" >&2
build_tree "$work/ucx/lib/pkgconfig" "$work/build-cuda-1.13.1"
stage_into "$stage/ucx-1.13.1" "$work/ucx" "$work/build-cuda-1.13.1" 1.13.1
echo "device_stage.sh: the same against UCX $wheel_version" >&2
build_tree "$work/ucx-wheel/pkgconfig" "$work/build-cuda-$wheel_version"
stage_into "$stage/ucx-$wheel_version" "$wheel_prefix" "$work/build-cuda-$wheel_version" "$wheel_version"
du -sh "$stage"/ucx-*
du -sh "$stage"
