#!/usr/bin/env bash
# Runs an ordinary MPI program (alltoall_cases.c, or alltoall_cases.F90 with `use mpi` or
# `use mpi_f08`), built here with mpicc / mpifort, without libfast_mpi, with it preloaded
# (LD_PRELOAD) and with it linked (-lfast_mpi), and compares every rank's receive buffers byte
# for byte; then checks in libfast_mpi's summary that the calls it should take went FAST and
# the others fell back for the expected reasons.
#
#   run_cases.sh --build DIR --mpirun MPIRUN_SH [options]
#     --lang c|fortran|f08   the program (c)
#     --mode cases|repeat|errors|settings
#                            cases: every case, three ways, compared (default);
#                            repeat: 1000 calls preloaded, memory flat;
#                            errors: mismatched counts, preloaded: every rank gets the error;
#                            settings: bad FAST_MPI_* values stop MPI_Init with their name,
#                            an unknown FAST_MPI_* name is one warning of rank 0 and the
#                            calls still go FAST
#     --np N                 ranks (4)
#     --servers G            FAST_MPI_GPUS_PER_SERVER (0: one server per node)
#     --tls sm|tcp           UCX transports of the executor (sm)
#     --flow rendezvous|credits   FAST_MPI_FLOW (rendezvous)
#     --cc CC --sanitize S   the build's C compiler and b_sanitize (a sanitized library needs a
#                            program built the same way; Fortran is skipped then)
# Exit status 0: passed; 77: skipped (no compiler for the language).
set -euo pipefail
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
here=$(cd "$(dirname "$0")" && pwd)
build= mpirun_sh= lang=c mode=cases np=4 servers=0 tls=sm flow=rendezvous cc=cc sanitize=none
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --mpirun) mpirun_sh=$2; shift 2 ;;
    --lang) lang=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --tls) tls=$2; shift 2 ;;
    --flow) flow=$2; shift 2 ;;
    --cc) cc=$2; shift 2 ;;
    --sanitize) sanitize=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_cases.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $build && -n $mpirun_sh ]] || { echo "run_cases.sh: --build and --mpirun are required (see --help)" >&2; exit 2; }
lib=$(cd "$build/mpi" && pwd)
[[ -f $lib/libfast_mpi.so ]] || { echo "run_cases.sh: no $lib/libfast_mpi.so"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
link=(-L"$lib" -Wl,--push-state,--no-as-needed -lfast_mpi -Wl,--pop-state -Wl,-rpath,"$lib")

# The program, plain and linked with libfast_mpi, built as a user builds it.
case "$lang" in
  c)
    flags=(-std=c99 -O2 -Wall)
    # A C program linked to a C++ library built with -fsanitize=undefined needs the C++ part of
    # the sanitizer runtime too.
    [[ $sanitize == none ]] || flags+=(-fsanitize="$sanitize" -fno-omit-frame-pointer -fsanitize-link-c++-runtime -lstdc++)
    OMPI_CC=$cc mpicc "${flags[@]}" "$here/alltoall_cases.c" -o "$work/prog"
    OMPI_CC=$cc mpicc "${flags[@]}" "$here/alltoall_cases.c" "${link[@]}" -o "$work/prog_linked" ;;
  fortran|f08)
    if [[ $sanitize != none ]]; then
      echo "run_cases.sh: skipped: a sanitized libfast_mpi needs a program built by $cc with the same sanitizers"
      exit 77
    fi
    command -v gfortran >/dev/null || { echo "run_cases.sh: skipped: no gfortran"; exit 77; }
    def=(); [[ $lang == f08 ]] && def=(-DF08)
    mpifort -O1 "${def[@]}" "$here/alltoall_cases.F90" -J "$work" -o "$work/prog"
    mpifort -O1 "${def[@]}" "$here/alltoall_cases.F90" -J "$work" "${link[@]}" -o "$work/prog_linked" ;;
  *) echo "run_cases.sh: unknown --lang '$lang'" >&2; exit 2 ;;
esac

export FAST_MPI_GPUS_PER_SERVER=$servers FAST_MPI_THRESHOLD=16K FAST_MPI_TIMEOUT=60 FAST_MPI_FLOW=$flow
# run NAME plain|preload|linked [ARGS...]: the program's dumps into $work/NAME, libfast_mpi's
# summary into $work/NAME.summary.
run() {
  local name=$1 how=$2 exe=$work/prog extra=()
  shift 2
  [[ $how == linked ]] && exe=$work/prog_linked
  [[ $how == preload ]] && extra=(-x LD_PRELOAD="$lib/libfast_mpi.so")
  # Over TCP, Open MPI's own traffic too: the progress case needs a protocol the sender drives
  # (over shared memory the receiver pulls a large message without the sender's progress).
  [[ $tls == tcp ]] && extra+=(-x OMPI_MCA_btl=self,tcp)
  mkdir -p "$work/$name"
  FAST_MPI_SUMMARY=$work/$name.summary "$mpirun_sh" --tls "$tls" --timeout 150 -np "$np" "${extra[@]}" "$exe" "$work/$name" "$@"
}

# summary_field FILE ROW COLUMN: a number of libfast_mpi's summary (COLUMN 3: calls, 4: fast,
# 5: fallback, 6: errors), or of its reasons line (ROW "reason", COLUMN the reason's name).
summary_field() {
  if [[ $2 == reason ]]; then
    sed -n 's/^fast_mpi: fallbacks by reason://p' "$1" | tr ' ' '\n' | grep -A1 -x "$3" | tail -n 1
  else
    awk -v row="$2" -v col="$3" '$2 == row { print $col; found = 1 } END { if (!found) print 0 }' "$1"
  fi
}
failures=0
shown() { # shown: a failed run's output from stdin, without the lines of a symbolizer that could not
  # start (sanitizer builds: libfast_mpi, preloaded, cannot load into llvm-symbolizer), 40 lines
  { grep -v -e "llvm-symbolizer" -e "symbolizer didn't start" -e "Can't read from symbolizer" \
    -e "restart external symbolizer" || true; } | head -40
}
expect() { # expect FILE ROW COLUMN OP VALUE
  local got; got=$(summary_field "$1" "$2" "$3")
  if ! (( got $4 $5 )); then echo "FAIL: $(basename "$1"): $2 $3 is $got, expected $4 $5"; failures=$((failures + 1)); fi
}

compare() { # compare DIR: every dump of the plain run, byte for byte
  local n=0 f
  for f in "$work/plain"/*; do
    n=$((n + 1))
    cmp -s "$f" "$work/$1/$(basename "$f")" || { echo "FAIL: $1/$(basename "$f") differs from the run without libfast_mpi"; failures=$((failures + 1)); }
  done
  [[ $(ls "$work/$1" | wc -l) -eq $n && $n -gt 0 ]] || { echo "FAIL: $1 has $(ls "$work/$1" | wc -l) dumps, the plain run $n"; failures=$((failures + 1)); }
  echo "run_cases.sh: $1: $n receive buffers identical to the run without libfast_mpi"
}

case "$mode" in
  cases)
    run plain plain
    run preload preload
    run linked linked
    compare preload
    compare linked
    for s in "$work/preload.summary" "$work/linked.summary"; do
      cat "$s"
      rows=(MPI_Alltoall MPI_Alltoallv MPI_Ialltoall MPI_Ialltoallv MPIX_Alltoallv_init)
      [[ $lang == c ]] && rows+=(MPIX_Alltoall_init)
      for row in "${rows[@]}"; do expect "$s" "$row" 4 '>' 0; expect "$s" "$row" 6 == 0; done
      expect "$s" reason in_place '>' 0
      if [[ $lang == c ]]; then
        expect "$s" reason datatype '>' 0
        expect "$s" reason below_threshold '>' 0
        expect "$s" MPI_Ialltoallv 5 == 0 # nonblocking calls never fall back late
      fi
    done ;;
  repeat)
    run preload preload repeat 1000
    cat "$work/preload.summary"
    expect "$work/preload.summary" MPI_Alltoallv 4 == $((1000 * np)) ;;
  errors)
    out=$(run preload preload errors)
    echo "$out"
    for ((r = 0; r < np; r++)); do
      for line in "rank $r: returned an error, class MPI_ERR_TRUNCATE: fast_mpi: MPI_Alltoallv: alltoallv: rank 1 expects" \
                  "rank $r: with a handler: returned an error, handler called 1 times" \
                  "rank $r: error handler called, class MPI_ERR_TRUNCATE" "rank $r: next call succeeded"; do
        grep -qF "$line" <<<"$out" || { echo "FAIL: no line '$line'"; failures=$((failures + 1)); }
      done
    done ;;
  settings)
    for bad in FAST_MPI_THRESHOLD=lots FAST_MPI_SCHEDULER=fastest; do
      if out=$(export "${bad?}"; run bad preload v_int 2>&1); then
        echo "FAIL: $bad: the job succeeded"; failures=$((failures + 1))
      fi
      grep -q "fast_mpi: rank [0-9]*: ${bad%%=*}" <<<"$out" ||
        { echo "FAIL: $bad: no error naming it:"; shown <<<"$out"; failures=$((failures + 1)); }
      echo "run_cases.sh: $bad: $(grep -m1 -o "fast_mpi: rank 0: .*" <<<"$out")"
    done
    # A typo'd name: the job runs, rank 0 names it and the known ones once, the calls go FAST.
    if ! out=$(export FAST_MPI_TRESHOLD=1; run typo preload v_int 2>&1); then
      echo "FAIL: FAST_MPI_TRESHOLD=1: the job failed:"; shown <<<"$out"; failures=$((failures + 1))
    fi
    warning="fast_mpi: warning: ignoring FAST_MPI_TRESHOLD: not a fast_mpi variable (known: FAST_MPI_ENABLE, FAST_MPI_THRESHOLD,"
    [[ $(grep -cF "$warning" <<<"$out") -eq 1 && $(grep -c "fast_mpi: warning" <<<"$out") -eq 1 ]] ||
      { echo "FAIL: FAST_MPI_TRESHOLD=1: not exactly one warning naming it and the known variables:"; shown <<<"$out"; failures=$((failures + 1)); }
    expect "$work/typo.summary" MPI_Alltoallv 4 '>' 0
    echo "run_cases.sh: FAST_MPI_TRESHOLD=1: $(grep -m1 -o "fast_mpi: warning: .\{0,60\}" <<<"$out")..." ;;
  *) echo "run_cases.sh: unknown --mode '$mode'" >&2; exit 2 ;;
esac
[[ $failures -eq 0 ]] || { echo "run_cases.sh: $failures failures"; exit 1; }
echo "run_cases.sh: passed ($lang, $mode, $np ranks, servers of ${servers/#0/node size}, UCX $tls, flow $flow)"
