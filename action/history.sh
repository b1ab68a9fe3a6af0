#!/usr/bin/env bash
# On a push: a run of the head for each suite, kept in the servegate-history branch (one JSON
# per commit and suite, logs left out), then its history into the job summary and its site.
set -euo pipefail
out="$SERVEGATE_OUT"
[ "$HISTORY" = true ] && [ "${GITHUB_EVENT_NAME:-}" = push ] || exit 0
history="$RUNNER_TEMP/servegate-history"
rm -rf "$history"
git worktree prune
if git fetch -q origin servegate-history 2>/dev/null; then
  git worktree add -q "$history" FETCH_HEAD
else
  git worktree add -q --detach "$history"
  git -C "$history" checkout -q --orphan servegate-history
  git -C "$history" rm -rfq .
fi
echo '*.log' >"$history/.gitignore"
while IFS=$'\t' read -r name suite; do
  "$SERVEGATE_BIN/harness" run --quiet --ref "$SERVEGATE_HEAD" --suite "$suite" \
    --out "$history/$name/$SERVEGATE_HEAD.json"
done <"$out/suites.tsv"
git -C "$history" add -A
git -C "$history" -c user.name=servegate -c user.email=servegate@users.noreply.github.com \
  commit -qm "run of $SERVEGATE_HEAD"
git -C "$history" push -q origin HEAD:servegate-history
"$SERVEGATE_BIN/harness" history "$history" | tee -a "${GITHUB_STEP_SUMMARY:-/dev/null}"
"$SERVEGATE_BIN/harness" publish "$history" --out "$out/site"
echo "site=$out/site" >>"$GITHUB_OUTPUT"
