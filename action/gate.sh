#!/usr/bin/env bash
# `harness ab` of the head against the base for each suite, each into its own folder; an exit
# code per suite (never the step's: the merge and the comment come first).
set -uo pipefail
out="$SERVEGATE_OUT"
: >"$out/codes.tsv"
[ -n "${SERVEGATE_BASE:-}" ] || exit 0
start=$(date +%s)
left=$(wc -l <"$out/suites.tsv")
while IFS=$'\t' read -r name suite; do
  budget=()
  if [ -n "$BUDGET_MINUTES" ]; then  # an equal share of what is left, for each suite to come
    share=$("$SERVEGATE_BIN/python" -c 'import sys; b, used, left = map(float, sys.argv[1:])
print(f"{max(b - used / 60, 1) / left:.2f}")' "$BUDGET_MINUTES" "$(($(date +%s) - start))" "$left")
    budget=(--budget-minutes "$share")
  fi
  mkdir -p "$out/$name"
  echo "::group::servegate: $name"
  # shellcheck disable=SC2086  # ARGS is a list of arguments
  GITHUB_STEP_SUMMARY="" "$SERVEGATE_BIN/harness" ab --quiet \
    --base "$SERVEGATE_BASE" --head "$SERVEGATE_HEAD" --suite "$suite" "${budget[@]}" \
    --out-dir "$out/$name" --summary "$out/$name/summary.md" $ARGS
  code=$?
  echo "::endgroup::"
  printf '%s\t%s\n' "$name" "$code" >>"$out/codes.tsv"
  left=$((left - 1))
done <"$out/suites.tsv"
