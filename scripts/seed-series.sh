#!/bin/sh
# A seed caught every time? N A/Bs of the seed's flag on one build (by default the boundary
# spill: base the shipped token cap, head the exactly-tight 2048 that spills the fourth row),
# then M bisects
# over a throwaway branch of three commits on HEAD whose middle one reintroduces the seed's bug
# (the default cap re-derived as rows x chunk, 2048). One TSV row per run: exit code, wall
# time, verdict (and for a bisect the commit it named). docs/seeds.md, section 1, reads it.
#
# Another seed's A/Bs (the bisect's patch is the boundary spill's, so M must be 0 there):
#   SUITE=long-transient HEAD_FLAGS="--max-batch-prefill-tokens 0" sh scripts/seed-series.sh 10 0
#   SUITE=prefill-storm HEAD_FLAGS="--prefill-max-seqs 4" sh scripts/seed-series.sh 10 0
#
#   sh scripts/seed-series.sh [N] [M] [OUT]     # defaults: 10 A/Bs, 3 bisects
set -u
N=${1:-10}
M=${2:-3}
OUT=${3:-results/$(date -u +%Y-%m-%d)-seed-series/$(date -u +%H%M%S).tsv}
SUITE=${SUITE:-boundary-spill}
HEAD_FLAGS=${HEAD_FLAGS:---max-batch-prefill-tokens 2048}
if [ "$M" -gt 0 ] && [ "$SUITE" != boundary-spill ]; then
  echo "seed-series: the bisect reintroduces the boundary spill; run $SUITE with M=0" >&2
  exit 2
fi
HARNESS=${HARNESS:-.venv/bin/harness}
ROOT=$(git rev-parse --show-toplevel) || exit 2
cd "$ROOT" || exit 2
RUNS=${OUT%.tsv}
mkdir -p "$(dirname "$OUT")" "$RUNS"

seed_branch() {  # prints the sha of the branch's tip; the seeded commit is its parent
  tmp=$(mktemp -d)
  git worktree add -q --detach "$tmp" HEAD || return 1
  g() { git -C "$tmp" -c user.name=seed-series -c user.email=seed-series@localhost "$@"; }
  echo "A note before the seed (scripts/seed-series.sh)." >>"$tmp/docs/seeds.md"
  g commit -qam "docs: a note (seed-series: harmless)" || return 1
  python3 - "$tmp/engine/config.py" <<'PY' || return 1
import sys
path = sys.argv[1]
text = open(path).read()
old = "    return 2 * max_batch_prefill * prefill_chunk_size\n"
if text.count(old) != 1:
    sys.exit(f"{path}: the seed's patch point (default_token_cap) is gone; update seed-series.sh")
open(path, "w").write(text.replace(old, "    return max_batch_prefill * prefill_chunk_size\n"))
PY
  g commit -qam "config: the token cap is rows x chunk (seed-series: the boundary spill)" || return 1
  seeded=$(git -C "$tmp" rev-parse HEAD)
  echo "A note after the seed (scripts/seed-series.sh)." >>"$tmp/docs/seeds.md"
  g commit -qam "docs: another note (seed-series: harmless)" || return 1
  tip=$(git -C "$tmp" rev-parse HEAD)
  git branch -f seed/boundary-spill "$tip" >/dev/null
  git worktree remove --force "$tmp"
  echo "$seeded $tip"
}

row() {  # label expected rc seconds verdict named report
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" \
    "$(cut -d' ' -f1 /proc/loadavg)" "$7" >>"$OUT"
  echo "$1: exit $3 (expected $2), $4 s, $5 $6"
}

printf 'run\texpected_exit\texit\twall_s\tverdict\tnamed\tload1_after\treport\n' >"$OUT"
i=1
while [ "$i" -le "$N" ]; do
  log="$RUNS/ab-$i.log"
  t0=$(date +%s)
  "$HARNESS" ab --quiet --suite "$SUITE" --head-flags "$HEAD_FLAGS" \
    --out-dir "$RUNS/ab-$i" >"$log" 2>&1
  rc=$?
  verdict=$(sed -n 's/^verdict: \([A-Z]*\).*/\1/p' "$log" | tail -1)
  row "ab-$i" 1 "$rc" "$(($(date +%s) - t0))" "$verdict" "-" "$(sed -n 's/^report: //p' "$log")"
  i=$((i + 1))
done
[ "$M" -gt 0 ] || exit 0
set -- $(seed_branch) || { echo "seed-series: could not build the seed branch" >&2; exit 2; }
seeded=$1 tip=$2
i=1
while [ "$i" -le "$M" ]; do
  log="$RUNS/bisect-$i.log"
  t0=$(date +%s)
  "$HARNESS" bisect --quiet --suite boundary-spill --good HEAD --bad "$tip" \
    --out-dir "$RUNS/bisect-$i" >"$log" 2>&1
  rc=$?
  named=$(sed -n 's/^first bad commit: \([0-9a-f]*\).*/\1/p' "$log" | tail -1)
  case "$seeded" in "$named"*) hit=seeded ;; *) hit=other ;; esac
  [ -n "$named" ] || hit=none
  row "bisect-$i" 0 "$rc" "$(($(date +%s) - t0))" "$hit" "${named:--}" \
    "$(sed -n 's/^report: //p' "$log" | tail -1)"
  i=$((i + 1))
done
echo "wrote $OUT (seeded commit $seeded)"
