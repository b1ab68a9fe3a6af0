#!/bin/sh
# The tests that read a clock or start a server (marked `clock` by tests/conftest.py) and the
# `timing` ones, run as CI runs them (pytest-xdist, one file per worker) beside a busy process
# on every core. Each must still pass: a test asserts only what a machine three times slower and
# noisier keeps true (docs/testing.md). Run it before calling a change to a test done.
#   sh scripts/stress-tests.sh                    those tests, one busy process per core
#   sh scripts/stress-tests.sh --repeat 3         three times in a row, stopping at a failure
#   sh scripts/stress-tests.sh --all              every test, not only those
#   sh scripts/stress-tests.sh --cpu avx2 tests/engine   as an AVX2-only CPU computes
#   sh scripts/stress-tests.sh --hogs 0           no busy processes (the selection alone)
# Other arguments go to pytest. Each pass's log goes to $LOGS (default /tmp/servegate-stress).
set -u
cd "$(dirname "$0")/.." || exit 2
hogs=$(nproc 2>/dev/null || echo 2)
repeat=1
marks="clock or timing"
cpu=native
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --all) marks=""; shift ;;
    --cpu) cpu=$2; shift 2 ;;
    *) break ;;
  esac
done
case "$repeat$hogs" in *[!0-9]*|"") echo "stress-tests: --repeat and --hogs take whole numbers" >&2; exit 2 ;; esac
case "$cpu" in
  native) ;;
  avx2) export SERVEGATE_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ;;
  *) echo "stress-tests: --cpu is native or avx2, got '$cpu'" >&2; exit 2 ;;
esac
[ -x .venv/bin/python ] || { echo "stress-tests: no .venv: run sh scripts/install.sh --test" >&2; exit 2; }
[ -n "$marks" ] && set -- -m "$marks" "$@"
LOGS=${LOGS:-/tmp/servegate-stress}
mkdir -p "$LOGS"

pids=""
stop_hogs() { [ -n "$pids" ] && kill $pids 2>/dev/null; pids=""; }
trap 'stop_hogs' EXIT
trap 'stop_hogs; exit 130' INT TERM
i=0
while [ "$i" -lt "$hogs" ]; do
  python3 -c 'while True: pass' &
  pids="$pids $!"
  i=$((i + 1))
done

echo "stress-tests: $hogs busy process(es), cpu $cpu, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
pass=1
while [ "$pass" -le "$repeat" ]; do
  log="$LOGS/$(date -u +%Y%m%dT%H%M%S)-pass$pass.log"
  start=$(date +%s)
  .venv/bin/python -m pytest -q -n auto --dist loadfile -p no:cacheprovider \
    --basetemp="$LOGS/tmp-$pass" "$@" >"$log" 2>&1
  rc=$?
  summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|^[0-9]+ (passed|failed)' "$log" | tail -n 1)
  echo "stress-tests: pass $pass of $repeat: exit $rc after $(($(date +%s) - start)) s: $summary ($log)"
  grep -E '^(FAILED|ERROR) ' "$log"
  rm -rf "$LOGS/tmp-$pass"
  [ $rc -eq 0 ] || [ $rc -eq 5 ] || exit $rc
  pass=$((pass + 1))
done
