# Sourced by device_stage.sh, device_run.sh and device_perf.sh: how they tell that a stage's
# programs run the stage's own UCX, whichever UCX version (the ones a stage holds differ in what
# ucx_info prints).

# loads_outside DIR FILE: prints each UCX, executor or CUDA runtime library that FILE would load
# from outside DIR/lib, and any library not found but the driver's (libcuda, libnvidia-ml), one
# per line; ldd decides, in the environment as it is.
loads_outside() {
  local lib name arrow path rest
  lib=$(realpath -m "$1/lib")
  ldd "$2" 2>&1 | while read -r name arrow path rest; do
    if [[ $path == not ]]; then
      [[ $name == libcuda.so* || $name == libnvidia-ml.so* ]] || echo "$name not found"
    elif [[ $name == libuc[pstm]* || $name == libfast_executor* || $name == libcudart* ]] &&
         [[ $(realpath -m "$path") != "$lib"/* ]]; then
      echo "$name => $path"
    fi
  done
}

# ucx_version DIR: the UCX version that DIR/bin/ucx_info runs ("# Version X" from UCX 1.13,
# "# Library version: X" from later ones).
ucx_version() {
  timeout 30 "$1/bin/ucx_info" -v 2>/dev/null | sed -n -E 's/^# (Library version: |Version )//p' | head -1
}
