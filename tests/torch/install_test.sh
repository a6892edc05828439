#!/usr/bin/env bash
# The installed fast_torch, used as a user would: `meson install` into a scratch root, then from
# a fresh environment (env -i: no PYTHONPATH, no LD_LIBRARY_PATH, outside the source and build
# trees) a scratch venv that sees torch's site-packages and the installed package's site
# directory (through a .pth file, as an installed package is found): `import fast_torch`, then
# the MoE example on 2 ranks under torchrun.
#   install_test.sh BUILD_DIR EXAMPLE PYTHON
set -euo pipefail
build_dir=$1
example=$(realpath "$2")
python=$3
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build_dir" --no-rebuild --destdir "$root" >"$root/install.log" 2>&1 ||
  { tail -n 5 "$root/install.log"; echo "meson install failed"; exit 1; }
package=$(find "$root" -type d -name fast_torch -not -path "$root/venv/*" | head -n 1)
[[ -n "$package" && -f "$package/__init__.py" && -n "$(ls "$package"/_C*.so)" ]] ||
  { echo "fast_torch was not installed (under $root)"; exit 1; }
echo "installed: ${package#"$root"}"
ldd "$package"/_C*.so | grep -q fast_executor && { echo "_C links libfast_executor.so: not self-contained"; exit 1; }

"$python" -m venv --without-pip "$root/venv"
site=$("$root/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/torch.pth"
dirname "$package" >>"$site/fast_torch.pth"

# What the test's environment sets for UCX, gloo, OpenMP and a sanitizer build's runtime.
fresh=(PATH=/usr/bin:/bin HOME="$root")
while IFS= read -r -d '' var; do fresh+=("$var"); done < <(env -0 | grep -zE '^(UCX_|GLOO_|OMP_|ASAN_|UBSAN_|LD_PRELOAD=)')
cd "$root"
env -i "${fresh[@]}" "$root/venv/bin/python" -c '
import sys, fast_torch
sys.exit(0 if fast_torch.__file__.startswith(sys.argv[1]) else f"fast_torch came from {fast_torch.__file__}")' "$root"
env -i "${fresh[@]}" "$root/venv/bin/python" -m torch.distributed.run --rdzv-backend c10d \
  --rdzv-endpoint 127.0.0.1:0 --local-addr 127.0.0.1 --nnodes 1 --nproc-per-node 2 \
  "$example" --gpus-per-server 1 --iterations 1
