#!/usr/bin/env bash
# `harness ab` of the head against the base for each suite, each into its own folder; an exit
# code per suite (never the step's: the merge and the comment come first).
set -uo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "$0")/lib.sh"
out="$SERVEGATE_OUT"
: >"$out/codes.tsv"
[ -n "${SERVEGATE_BASE:-}" ] || exit 0
invalid() {  # one line in the log, and the merge step's INVALID (exit 2) with it
  echo "::error::servegate: $1"
  put "$GITHUB_ENV" SERVEGATE_INVALID "$1"
  exit 0
}
if [ -n "$BUDGET_MINUTES" ] && ! [[ $BUDGET_MINUTES =~ ^[0-9]+(\.[0-9]+)?$ && ! $BUDGET_MINUTES =~ ^0*(\.0*)?$ ]]; then
  invalid "input 'budget-minutes' must be a number of minutes above 0"
fi
case "${INCONCLUSIVE:-}" in
  "" | pass | fail) ;;
  *) invalid "input 'inconclusive' must be pass or fail" ;;
esac
# ARGS as a shell splits them (quotes kept whole), never globbed; a quote left open is refused
if ! args_file=$(mktemp) || ! "$SERVEGATE_BIN/python" -c 'import shlex, sys
sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' "$ARGS" >"$args_file" 2>/dev/null; then
  invalid "input 'args' cannot be split as a shell would (a quote left open?)"
fi
mapfile -d '' args <"$args_file"
start=$(date +%s)
left=$(wc -l <"$out/suites.tsv")
while IFS=$'\t' read -r name suite; do
  given=()  # the inputs that reach every suite's A/B
  [ -n "${INCONCLUSIVE:-}" ] && given+=(--inconclusive "$INCONCLUSIVE")
  if [ -n "$BUDGET_MINUTES" ]; then  # an equal share of what is left, for each suite to come
    share=$("$SERVEGATE_BIN/python" -c 'import sys; b, used, left = map(float, sys.argv[1:])
print(f"{max(b - used / 60, 1) / left:.2f}")' "$BUDGET_MINUTES" "$(($(date +%s) - start))" "$left")
    given+=(--budget-minutes "$share")
  fi
  mkdir -p "$out/$name"
  echo "::group::servegate: $name"
  GITHUB_STEP_SUMMARY="" "$SERVEGATE_BIN/harness" ab --quiet \
    --base "$SERVEGATE_BASE" --head "$SERVEGATE_HEAD" --suite "$suite" "${given[@]}" \
    --out-dir "$out/$name" --summary "$out/$name/summary.md" "${args[@]}"
  code=$?
  echo "::endgroup::"
  printf '%s\t%s\n' "$name" "$code" >>"$out/codes.tsv"
  left=$((left - 1))
done <"$out/suites.tsv"
