#!/bin/sh
# A seed caught every time? N A/Bs of the seed's flag on one build (base the shipped default,
# head the seed's flag), then M bisects over a throwaway branch of three commits on HEAD whose
# middle one reintroduces the seed as the engine's default (engine/config.py). One TSV row per
# run: exit code, wall time, verdict (and for a bisect the commit it named). docs/seeds.md reads
# them. SUITE picks the seed (default boundary-spill):
#   boundary-spill  --max-batch-prefill-tokens 2048   the default cap re-derived as rows x chunk
#   long-transient  --max-batch-prefill-tokens 0      batched prefill uncapped by default
#   prefill-storm   --prefill-max-seqs 4              four prompts per prefill step by default
#
#   [SUITE=...] sh scripts/seed-series.sh [N] [M] [OUT]     # defaults: 10 A/Bs, 3 bisects
set -u
N=${1:-10}
M=${2:-3}
OUT=${3:-results/$(date -u +%Y-%m-%d)-seed-series/$(date -u +%H%M%S).tsv}
SUITE=${SUITE:-boundary-spill}
case "$SUITE" in
  boundary-spill)
    flags="--max-batch-prefill-tokens 2048" what="the token cap is rows x chunk"
    old="    return 2 * max_batch_prefill * prefill_chunk_size"
    new="    return max_batch_prefill * prefill_chunk_size" ;;
  long-transient)
    flags="--max-batch-prefill-tokens 0" what="batched prefill is uncapped by default"
    old="    max_batch_prefill_tokens: int | None = None  # None: derived; 0: uncapped"
    new="    max_batch_prefill_tokens: int | None = 0  # None: derived; 0: uncapped" ;;
  prefill-storm)
    flags="--prefill-max-seqs 4" what="four prompts share each prefill step by default"
    old="    prefill_max_seqs: int = 0"
    new="    prefill_max_seqs: int = 4" ;;
  *) echo "seed-series: no seed for suite $SUITE" >&2; exit 2 ;;
esac
HEAD_FLAGS=${HEAD_FLAGS:-$flags}
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
  python3 - "$tmp/engine/config.py" "$old" "$new" <<'PY' || return 1
import sys
path, old, new = sys.argv[1], sys.argv[2] + "\n", sys.argv[3] + "\n"
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"{path}: the seed's patch point is gone ({old.strip()!r}); update seed-series.sh")
open(path, "w").write(text.replace(old, new))
PY
  g commit -qam "config: $what (seed-series: the $SUITE seed)" || return 1
  seeded=$(git -C "$tmp" rev-parse HEAD)
  echo "A note after the seed (scripts/seed-series.sh)." >>"$tmp/docs/seeds.md"
  g commit -qam "docs: another note (seed-series: harmless)" || return 1
  tip=$(git -C "$tmp" rev-parse HEAD)
  git branch -f "seed/$SUITE" "$tip" >/dev/null
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
  "$HARNESS" bisect --quiet --suite "$SUITE" --good HEAD --bad "$tip" \
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
