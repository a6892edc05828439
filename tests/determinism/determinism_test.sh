#!/usr/bin/env bash
# The same matrices give byte-identical plans in separate processes and, when a reference
# binary from another build (another compiler) is given, in that build too.
# Usage: determinism_test.sh PLAN_HASH [REFERENCE_PLAN_HASH]
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" > "$work/first"
"$1" > "$work/second"
if ! cmp -s "$work/first" "$work/second"; then
  echo "two processes planned differently:"; diff "$work/first" "$work/second" | head -20; exit 1
fi
echo "two processes: $(wc -l < "$work/first") plans, identical"
if [[ $# -ge 2 && -n "$2" ]]; then
  "$2" > "$work/reference"
  if ! cmp -s "$work/first" "$work/reference"; then
    echo "this build and $2 planned differently:"; diff "$work/first" "$work/reference" | head -20; exit 1
  fi
  echo "and identical to $2"
fi
