#!/usr/bin/env bash
# `meson install` into a scratch root, then a program outside the tree compiles against the
# installed headers with nothing but `pkg-config --cflags fast`, and runs.
set -euo pipefail
build_dir=$1
source_dir=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$build_dir" --no-rebuild --destdir "$root" >/dev/null
pc=$(find "$root" -name fast.pc | head -n 1)
[[ -n "$pc" ]] || { echo "fast.pc was not installed"; exit 1; }
# As if installed with --prefix under the scratch root: point fast.pc's prefix there.
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed -i "s|^prefix=.*|prefix=$root$prefix|" "$pc"
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags fast)
echo "pkg-config --cflags fast: $flags"
c++ -std=c++20 -O1 $flags "$source_dir/tests/install/consumer.cpp" -o "$root/consumer"
"$root/consumer"
