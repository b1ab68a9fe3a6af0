#!/usr/bin/env bash
# One comment per pull request and suite set, found again by a hidden marker at its end and
# updated in place on every push. A fork's token cannot comment: the job summary has it all.
set -uo pipefail
out="$SERVEGATE_OUT"
[ "$COMMENT" = true ] && [ -n "${SERVEGATE_PR:-}" ] && [ -s "$out/merged.md" ] || exit 0
key=$(cut -f1 "$out/suites.tsv" | tr '\n' ' ' | sed 's/ $//')
marker="<!-- servegate: $key -->"
{ cat "$out/merged.md"; echo; echo "$marker"; } >"$out/comment.md"
comments="repos/$GITHUB_REPOSITORY/issues/$SERVEGATE_PR/comments"
id=$(gh api "$comments" --paginate --jq ".[] | select(.body | contains(\"$marker\")) | .id" | head -1)
if [ -n "$id" ]; then
  gh api -X PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F body=@"$out/comment.md" >/dev/null
else
  gh api -X POST "$comments" -F body=@"$out/comment.md" >/dev/null
fi || echo "::warning::servegate: the comment was not posted (a fork's token cannot); the job summary has it"
