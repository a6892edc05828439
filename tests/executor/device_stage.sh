#!/usr/bin/env bash
# Makes the folder that tests/executor/device_run.sh runs on a CUDA GPU machine: UCX 1.13.1
# (Debian 12's source) built with CUDA support, this tree's libfast_executor and exec_cuda_test
# built with -Dcuda=enabled against it, and the CUDA runtime, relocatable, about 4 MB. The GPU
# machine then needs only its driver (the stage was run on an H200 with driver 580).
#
# Why build UCX: Debian's libucx has no CUDA transports. UCX's CUDA transport needs nvml.h,
# which comes from Debian's non-free libnvidia-ml-dev. Both are fetched through apt with the
# sources given on the command line (nothing is added to the system's lists). Needs Debian 12
# as root with nvcc in /usr/local/cuda, and the packages of scripts/dev.
#   device_stage.sh STAGE_DIR [WORK_DIR]    (WORK_DIR: where UCX is built, /tmp/fast-device-stage)
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
stage=${1:?usage: device_stage.sh STAGE_DIR [WORK_DIR]}
work=${2:-/tmp/fast-device-stage}
cuda=/usr/local/cuda
[[ -x $cuda/bin/nvcc ]] || { echo "device_stage.sh: no nvcc in $cuda/bin" >&2; exit 1; }
mkdir -p "$work/apt/lists/partial" "$stage"
stage=$(cd "$stage" && pwd)
cd "$work"
trap 'echo "device_stage.sh: failed; the logs are in $work (autogen.log, configure.log, make.log)" >&2' ERR

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >apt/sources.list <<EOF
deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main
deb [signed-by=$keyring] http://deb.debian.org/debian bookworm contrib non-free
EOF
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
echo "device_stage.sh: fetching UCX's source and nvml.h" >&2
apt-get "${apt_opts[@]}" update -qq
[[ -f ucx_1.13.1.orig.tar.xz ]] || apt-get "${apt_opts[@]}" source --download-only -qq ucx=1.13.1-1
ls libnvidia-ml-dev_*.deb libnvidia-ml1_*.deb >/dev/null 2>&1 ||
  apt-get "${apt_opts[@]}" download -qq libnvidia-ml-dev libnvidia-ml1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends autoconf automake libtool make >/dev/null
rm -rf nvml && mkdir nvml
for deb in libnvidia-ml-dev_*.deb libnvidia-ml1_*.deb; do dpkg -x "$deb" nvml; done

prefix=$work/ucx
if [[ ! -f $prefix/lib/pkgconfig/ucx.pc ]]; then
  echo "device_stage.sh: building UCX with CUDA (a few minutes)" >&2
  rm -rf ucx-1.13.1 && tar xf ucx_1.13.1.orig.tar.xz
  cd ucx-1.13.1
  cp -r debian.upstream debian # configure.ac lists files under debian/
  ./autogen.sh >../autogen.log 2>&1
  ./configure --prefix="$prefix" --with-cuda="$cuda" --enable-mt --disable-numa --disable-doxygen-doc \
    --without-java --without-go --without-rocm --without-verbs --without-rdmacm --without-knem \
    --without-xpmem --without-ugni --without-fuse3 \
    CPPFLAGS="-I$work/nvml/usr/include" LDFLAGS="-L$work/nvml/usr/lib/x86_64-linux-gnu/nvidia/current" \
    >../configure.log 2>&1
  grep -q "UCT modules:.*cuda" ../configure.log || { echo "device_stage.sh: UCX found no CUDA (../configure.log)" >&2; exit 1; }
  # The libraries, their modules and ucx_info only: UCX 1.13's test programs use cuCtxCreate's
  # pre-CUDA-13 signature and do not build with CUDA 13.
  for dir in src/ucm src/ucs src/uct src/ucp src/tools/info; do
    make -j"$(nproc)" -C "$dir" >>../make.log 2>&1
    make -C "$dir" install >>../make.log 2>&1
  done
  make install-pkgconfigDATA >>../make.log 2>&1
  cd "$work"
fi

echo "device_stage.sh: building libfast_executor and exec_cuda_test with CUDA" >&2
build=$work/build-cuda
# A build folder belongs to one source tree: another tree's is set up afresh.
[[ -f $build/.fast-source && $(cat "$build/.fast-source") == "$source_dir" ]] || rm -rf "$build"
if [[ ! -f $build/build.ninja ]]; then
  PATH=$cuda/bin:$PATH PKG_CONFIG_PATH=$prefix/lib/pkgconfig \
    meson setup "$build" "$source_dir" --buildtype=release -Dcuda=enabled -Dbenchmarks=disabled >/dev/null
  echo "$source_dir" >"$build/.fast-source"
fi
PATH=$cuda/bin:$PATH ninja -C "$build" tests/executor/exec_cuda_test >/dev/null

rm -rf "$stage/bin" "$stage/lib"
mkdir -p "$stage/bin" "$stage/lib/ucx"
# Real files, not links (the folder may travel where links do not).
cp -L "$prefix"/lib/lib{ucp,ucs,uct,ucm,ucs_signal}.so.0 "$stage/lib/"
for module in "$prefix"/lib/ucx/*.so.0; do cp -L "$module" "$stage/lib/ucx/"; done
cudart=$(ldd "$build/tests/executor/exec_cuda_test" | awk '/libcudart/ { print $3 }')
[[ -f $cudart ]] || { echo "device_stage.sh: exec_cuda_test links no CUDA runtime found on this machine" >&2; exit 1; }
cp -L "$cudart" "$build/executor/libfast_executor.so.0" "$stage/lib/"
cp "$prefix/bin/ucx_info" "$build/tests/executor/exec_cuda_test" "$stage/bin/"
strip --strip-unneeded "$stage"/lib/*.so.* "$stage"/lib/ucx/*.so.* "$stage"/bin/*
du -sh "$stage"
