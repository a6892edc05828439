#!/usr/bin/env bash
# `meson install` into a scratch root, then the MoE example on 2 ranks with the installed
# fast_torch only (not the build tree's), run from outside the source tree.
#   install_test.sh BUILD_DIR EXAMPLE PYTHON
set -euo pipefail
build_dir=$1
example=$2
python=$3
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build_dir" --no-rebuild --destdir "$root" >"$root/install.log" 2>&1 ||
  { tail -n 5 "$root/install.log"; echo "meson install failed"; exit 1; }
package=$(find "$root" -type d -name fast_torch | head -n 1)
library=$(find "$root" -name 'libfast_executor.so*' | head -n 1)
[[ -n "$package" && -f "$package/__init__.py" && -n "$(ls "$package"/_C*.so)" ]] ||
  { echo "fast_torch was not installed (under $root)"; exit 1; }
echo "installed: ${package#"$root"}"
cd "$root"
PYTHONPATH=$(dirname "$package") LD_LIBRARY_PATH=$(dirname "$library")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  "$python" -c 'import fast_torch, sys; sys.exit(0 if fast_torch.__file__.startswith(sys.argv[1]) else 1)' "$root"
PYTHONPATH=$(dirname "$package") LD_LIBRARY_PATH=$(dirname "$library")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  "$python" "$example" --nproc 2 --gpus-per-server 1 --iterations 1
