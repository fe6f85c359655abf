# shellcheck shell=sh
# tests/fuzz_lib.sh -- what the libFuzzer drivers share (sourced by tests/datasets/run_fuzz.sh
# and tests/nn/run_fuzz.sh, two folders below the repository's root):
#
#   HERE, ROOT                      the sourcing script's folder, the repository
#   fuzz_init TAG [SECONDS]         a temporary directory WORK (removed at exit) holding the seed
#                                   corpus directory C and artifacts/; how long to fuzz (60 s)
#   fuzz_build NAME SOURCE...       clang + libFuzzer + ASan + UBSan -> $WORK/NAME (-lxxhash -lm)
#   fuzz_run NAME MAX_LEN DICT      fuzzes from $C; exits non-zero on a crash, an invariant
#                                   failure or a leak, the crashing inputs kept in a directory it
#                                   prints
#
# Environment: CC_FUZZ (compiler, default clang), FUZZ_JOBS (parallel workers, default 1).

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

fuzz_init() {
  FUZZ_TAG=$1
  SECS=${2:-60}
  CC=${CC_FUZZ:-clang}
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/tg-fuzz-$FUZZ_TAG.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT INT TERM
  C="$WORK/corpus"
  mkdir -p "$C" "$WORK/artifacts"
}

fuzz_build() {
  fuzz_out=$1
  shift
  "$CC" -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    -I"$ROOT" "$@" -lxxhash -lm -o "$WORK/$fuzz_out"
}

fuzz_run() {
  fuzz_prog=$1 fuzz_max_len=$2 fuzz_dict=$3
  # Parallel mode (-jobs) writes fuzz-N.log files into the current directory: run in $WORK.
  JOBS=${FUZZ_JOBS:-1}
  PAR=""
  if [ "$JOBS" -gt 1 ]; then PAR="-jobs=$JOBS -workers=$JOBS"; fi
  cd "$WORK"
  set +e
  # shellcheck disable=SC2086
  "./$fuzz_prog" -max_total_time="$SECS" -max_len="$fuzz_max_len" -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -dict="$fuzz_dict" $PAR \
    -artifact_prefix="$WORK/artifacts/" "$C"
  rc=$?
  if [ "$JOBS" -gt 1 ]; then tail -n 20 fuzz-*.log; fi
  set -e
  if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$WORK/artifacts")" ]; then
    KEEP=$(mktemp -d "${TMPDIR:-/tmp}/tg-fuzz-$FUZZ_TAG-crash.XXXXXX")
    cp -r "$WORK/artifacts/." "$KEEP/"
    echo "run_fuzz.sh: FAILED (libFuzzer exit $rc); crashing inputs kept in $KEEP" >&2
    [ "$rc" -ne 0 ] || rc=1
    exit "$rc"
  fi
  echo "run_fuzz.sh: no crash in ${SECS}s"
}
