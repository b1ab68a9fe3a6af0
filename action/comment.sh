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
# ours: the marker at the end of a comment the workflow's own token wrote, never a comment
# of anyone else that carries the marker (it would be overwritten)
author=${SERVEGATE_COMMENT_AUTHOR:-github-actions[bot]}
id=$(gh api "$comments" --paginate | "$SERVEGATE_BIN/python" -c 'import json, sys
text, at, found, marker, author = sys.stdin.read(), 0, [], sys.argv[1], sys.argv[2]
decoder = json.JSONDecoder()
while (at := len(text) - len(text[at:].lstrip())) < len(text):  # --paginate: page after page
    page, at = decoder.raw_decode(text, at)
    found += [c["id"] for c in page if isinstance(c, dict) and isinstance(c.get("id"), int)
              and str(c.get("body", "")).rstrip().endswith(marker)
              and (c.get("user") or {}).get("login") == author]
print(found[0] if found else "")' "$marker" "$author")
if [ -n "$id" ]; then
  gh api -X PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F body=@"$out/comment.md" >/dev/null
else
  gh api -X POST "$comments" -F body=@"$out/comment.md" >/dev/null
fi || echo "::warning::servegate: the comment was not posted (a fork's token cannot); the job summary has it"
