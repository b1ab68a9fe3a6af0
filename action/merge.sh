#!/usr/bin/env bash
# The suites' results as one answer: `harness merge`'s table, then what judged the pull
# request, then each suite's own summary folded; the job summary gets it, the comment too.
set -uo pipefail
out="$SERVEGATE_OUT"
merged="$out/merged.md"
: >"$merged"
results=$(find "$out" -mindepth 2 -maxdepth 2 -name '*.json' | sort)
code=0 verdict=PASS
if [ -n "${SERVEGATE_INVALID:-}" ]; then
  code=2 verdict=INVALID
  echo "### ❌ servegate: INVALID (exit 2): ${SERVEGATE_INVALID}" >>"$merged"
elif [ -z "${SERVEGATE_BASE:-}" ]; then
  verdict="" code=0
elif [ -n "$results" ]; then
  # shellcheck disable=SC2086  # one result a line, paths without spaces (the action's own)
  GITHUB_STEP_SUMMARY="" GITHUB_OUTPUT="$out/merge.out" "$SERVEGATE_BIN/harness" merge \
    $results --summary "$merged" >/dev/null
  verdict=$(sed -n 's/^verdict=//p' "$out/merge.out")
  code=$(sed -n 's/^exit-code=//p' "$out/merge.out")
fi
while IFS=$'\t' read -r name suite_code; do  # a suite that wrote no result: invalid
  if [ -z "$(find "$out/$name" -maxdepth 1 -name '*.json')" ]; then
    [ -s "$merged" ] || echo "### ❌ servegate: INVALID (exit 2)" >>"$merged"
    echo "- Suite \`$name\` wrote no result (exit $suite_code): its error is in the job's log." >>"$merged"
    code=2 verdict=INVALID
  elif [ "$suite_code" -gt "$code" ]; then  # an exit the result does not say (a signal)
    code=$((suite_code > 2 ? 2 : suite_code))
    verdict=$([ "$code" = 1 ] && echo REGRESSION || echo INVALID)
  fi
done <"$out/codes.tsv"
if [ -s "$out/notes.md" ]; then
  { echo; echo "What judged this pull request:"; echo; cat "$out/notes.md"; } >>"$merged"
fi
for summary in "$out"/*/summary.md; do
  [ -f "$summary" ] || continue
  name=$(basename "$(dirname "$summary")")
  { printf '\n<details><summary>%s</summary>\n\n' "$name"; cat "$summary"; printf '\n</details>\n'; } >>"$merged"
done
[ -s "$merged" ] && cat "$merged" >>"${GITHUB_STEP_SUMMARY:-/dev/null}"
{
  echo "verdict=$verdict"
  echo "exit-code=$code"
  echo "summary=$merged"
  echo "reports<<SERVEGATE_EOF"
  find "$out" -mindepth 2 -maxdepth 2 -name '*.md' ! -name summary.md | sort
  echo "SERVEGATE_EOF"
  echo "results<<SERVEGATE_EOF"
  [ -n "$results" ] && echo "$results"
  echo "SERVEGATE_EOF"
} >>"$GITHUB_OUTPUT"
echo "SERVEGATE_CODE=$code" >>"$GITHUB_ENV"
