#!/bin/sh
# Gate power, measured: N A/A runs of the README's first command (harness ab --base main
# --head HEAD), then one run per seeded prefill slowdown (a throwaway commit whose scheduler
# spins, real CPU work, for FACTOR-1 of each prefill step's time), each with its exit code
# and wall time, into a TSV file. docs/statistics.md ("Power table") says how to read it.
# TTFT moves by less than FACTOR: on short-concurrency a prefill is about 90% of TTFT p50
# (2026-12-04, Intel Xeon VM), so a TTFT p50 of 1.07x takes FACTOR 1.078.
#
#   sh scripts/power-runs.sh [N] [OUT]        # N A/A runs (default 5), OUT default below
#   BUSY=1 sh scripts/power-runs.sh           # with a CPU-bound process beside every run
#   FACTORS="1.2 1.1" sh scripts/power-runs.sh 0   # only the seeded regressions
#   FACTORS= sh scripts/power-runs.sh 2            # only A/A runs
#   ARGS="--suite S --max-rounds auto" sh scripts/power-runs.sh 1   # more options for every run
set -u
N=${1:-5}
OUT=${2:-results/$(date -u +%Y-%m-%d)-power-runs/$(date -u +%H%M%S).tsv}  # a dated folder (results/README.md)
FACTORS=${FACTORS-1.2}  # empty: no seeded run
BUSY=${BUSY:-0}
ARGS=${ARGS:-}  # split on spaces: options added to every harness ab
HARNESS=${HARNESS:-.venv/bin/harness}
ROOT=$(git rev-parse --show-toplevel) || exit 2
cd "$ROOT" || exit 2
RUNS=${OUT%.tsv}  # each run's report in its own folder: same-day A/As share a report name
mkdir -p "$(dirname "$OUT")" "$RUNS"

seed_commit() {  # $1 = factor; prints the sha of HEAD + "prefill is FACTOR times slower"
  tmp=$(mktemp -d)
  git worktree add -q --detach "$tmp" HEAD || return 1
  python3 - "$tmp/engine/scheduler.py" "$1" <<'PY' || { git worktree remove --force "$tmp"; return 1; }
import sys
path, factor = sys.argv[1], float(sys.argv[2])
text = open(path).read()
old = "            out = fn(*args)\n"
new = old + (  # real work: the compute thread spins (a sleep would leave the cores to others)
    f'            if kind.startswith("prefill"):  # seeded by power-runs.sh: prefill x{factor}\n'
    f"                spin_until = self.clock.now() + {factor - 1:.4f} * (self.clock.now() - t0)\n"
    f"                while self.clock.now() < spin_until:\n"
    f"                    pass\n"
)
if text.count(old) != 1:
    sys.exit(f"{path}: the seed's patch point (Scheduler._timed) is gone; update power-runs.sh")
open(path, "w").write(text.replace(old, new))
PY
  git -C "$tmp" -c user.name=power-runs -c user.email=power-runs@localhost \
    commit -qam "seed: prefill ${1}x slower (scripts/power-runs.sh)" || return 1
  sha=$(git -C "$tmp" rev-parse HEAD)
  git branch -f "power/prefill-$1x" "$sha" >/dev/null
  git worktree remove --force "$tmp"
  echo "$sha"
}

one() {  # $1 = label, $2 = expected exit, rest = harness ab arguments
  label=$1 expect=$2
  shift 2
  log="$RUNS/$label.log"
  busy_pid=""
  if [ "$BUSY" = 1 ]; then
    python3 -c "while True: pass" &
    busy_pid=$!
  fi
  load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
  t0=$(date +%s)
  "$HARNESS" ab --quiet --out-dir "$RUNS/$label" "$@" >"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null && wait "$busy_pid" 2>/dev/null
  verdict=$(sed -n 's/^verdict: \([A-Z]*\).*/\1/p' "$log" | tail -1)
  report=$(sed -n 's/^report: //p' "$log" | tail -1)
  rounds=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['comparison']['rounds'])" \
    "${report%.md}.json" 2>/dev/null || echo "?")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$expect" "$rc" "$((t1 - t0))" \
    "$verdict" "$rounds" "$BUSY" "$load" "$report" >>"$OUT"
  echo "$label: exit $rc (expected $expect), $((t1 - t0)) s, $verdict after $rounds rounds"
}

printf 'run\texpected_exit\texit\twall_s\tverdict\trounds\tbusy\tload1_before\treport\n' >"$OUT"
i=1
while [ "$i" -le "$N" ]; do
  one "aa-$i" 0 --base main --head HEAD $ARGS
  i=$((i + 1))
done
j=1
for f in $FACTORS; do  # FACTORS="1.07 1.07" runs the same seed twice, each in its own folder
  sha=$(seed_commit "$f") || { echo "power-runs: could not seed a ${f}x commit" >&2; exit 2; }
  one "prefill-${f}x-$j" 1 --base HEAD --head "$sha" $ARGS
  j=$((j + 1))
done
echo "wrote $OUT"
