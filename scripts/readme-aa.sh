#!/bin/sh
# The README's first command on fresh clones: N times, clone the committed main into a temporary
# folder and run `sh scripts/install.sh && .venv/bin/harness ab --base main --head HEAD` there, as
# a new user would. One TSV row per clone: exit code, install and A/A seconds, verdict, rounds.
#   sh scripts/readme-aa.sh [N] [OUT]     # defaults: 3 clones, results/DATE-readme-aa/HHMMSS.tsv
set -u
N=${1:-3}
case $N in *[!0-9]* | "") echo "readme-aa: N must be a whole number, got '$N'" >&2; exit 2 ;; esac
ROOT=$(git rev-parse --show-toplevel) || exit 2
OUT=${2:-$ROOT/results/$(date -u +%Y-%m-%d)-readme-aa/$(date -u +%H%M%S).tsv}
mkdir -p "$(dirname "$OUT")" "${OUT%.tsv}"
printf 'clone\tcommit\texit\tinstall_s\taa_s\tverdict\trounds\tload1_after\n' >"$OUT"
i=1
while [ "$i" -le "$N" ]; do
  dir=$(mktemp -d)
  git clone -q "$ROOT" "$dir/servegate" || exit 2
  log="${OUT%.tsv}/clone-$i.log"
  # a new user's caches: no worktrees, packed weights or compiled kernels from an earlier clone
  export XDG_CACHE_HOME="$dir/cache" TORCH_EXTENSIONS_DIR="$dir/torch_extensions"
  t0=$(date +%s)
  (cd "$dir/servegate" && sh scripts/install.sh) >"${log%.log}-install.log" 2>&1
  t1=$(date +%s)
  (cd "$dir/servegate" && .venv/bin/harness ab --base main --head HEAD) >"$log" 2>&1
  rc=$?
  t2=$(date +%s)
  verdict=$(sed -n 's/^verdict: \([A-Z]*\).*/\1/p' "$log" | tail -1)
  rounds=$(sed -n 's/.* \([0-9]*\) round(s), .*/\1/p' "$dir"/servegate/results/*.md 2>/dev/null | head -1)
  mkdir -p "${OUT%.tsv}/clone-$i"  # the report and its JSON, not the clone's results/README.md
  cp "$dir"/servegate/results/20*.md "$dir"/servegate/results/20*.json "${OUT%.tsv}/clone-$i/" 2>/dev/null
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$(git -C "$dir/servegate" rev-parse --short HEAD)" \
    "$rc" "$((t1 - t0))" "$((t2 - t1))" "$verdict" "${rounds:--}" "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT"
  echo "clone $i: exit $rc, install $((t1 - t0)) s, A/A $((t2 - t1)) s, $verdict, ${rounds:--} rounds"
  rm -rf "$dir"
  i=$((i + 1))
done
