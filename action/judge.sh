#!/usr/bin/env bash
# What judges the head comes from the base branch: the project file and the repository's own
# suite files (shipped suites come with the harness). A pull request that changes them is told
# that its changes take effect once merged.
set -euo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "$0")/lib.sh"
refuse base "$BASE"
refuse head "$HEAD_REF"
refuse project "$PROJECT"
refuse suites "$SUITES" list
out="$SERVEGATE_OUT" judge="$RUNNER_TEMP/servegate-judge"
rm -rf "$judge" && mkdir -p "$judge"
: >"$out/notes.md"
event() { "$SERVEGATE_BIN/python" -c 'import json, os, sys
doc = json.load(open(os.environ["GITHUB_EVENT_PATH"]))
for key in sys.argv[1].split("."):
    doc = doc.get(key) if isinstance(doc, dict) else None
print(doc if isinstance(doc, (str, int)) else "")' "$1"; }

base="$BASE"
if [ -z "$base" ] && [ "${GITHUB_EVENT_NAME:-}" = pull_request ]; then
  base="origin/$GITHUB_BASE_REF"
  git rev-parse -q --verify "$base^{commit}" >/dev/null || base="$GITHUB_BASE_REF"
fi
head_sha=$(git rev-parse "$HEAD_REF^{commit}")
base_sha=""
if [ -z "$base" ]; then
  echo "servegate: not a pull request and no base input: no A/B"
elif ! base_sha=$(git rev-parse -q --verify "$base^{commit}"); then
  echo "::error::servegate: base $base is not in this clone; check out with fetch-depth: 0"
  put "$GITHUB_ENV" SERVEGATE_INVALID "base $base is not in the clone (fetch-depth: 0)"
  base_sha=""
fi
put "$GITHUB_ENV" SERVEGATE_HEAD "$head_sha"
put "$GITHUB_ENV" SERVEGATE_BASE "$base_sha"
pr=$(event pull_request.number)
[[ $pr =~ ^[0-9]*$ ]] || pr=""
put "$GITHUB_ENV" SERVEGATE_PR "$pr"

# a path (has a slash or ends in .toml) is the repository's; anything else a shipped name
from_base() {  # PATH: extract its folder from the base commit; the judged path, or "" if none
  [ -n "$base_sha" ] || return 0
  git cat-file -e "$base_sha:$1" 2>/dev/null || return 0
  dir=$(dirname "$1")
  if [ "$dir" = . ]; then git show "$base_sha:$1" >"$judge/$1"; else
    git archive "$base_sha" -- "$dir" | tar -x -C "$judge"; fi
  echo "$judge/$1"
}
changed() {  # PATH: say when the pull request changes a file that judges it
  git diff --quiet "$base_sha" "$head_sha" -- "$1" ||
    echo "- This pull request changes \`$1\`; it was judged by the base branch's, and its change takes effect once merged." >>"$out/notes.md"
}
project=$(from_base "$PROJECT")
if [ -n "$project" ]; then changed "$PROJECT"; else
  project="$PROJECT"
  [ -n "$base_sha" ] && echo "- The base branch has no \`$PROJECT\`: this pull request's own was used." >>"$out/notes.md"
fi
put "$GITHUB_ENV" SERVEGATE_PROJECT "$(realpath -- "$project")"
: >"$out/suites.tsv"
set -f  # a list of names and paths, split on blanks, never expanded as globs
for suite in $SUITES; do
  name=$(basename "$suite" .toml | tr -c 'A-Za-z0-9._\n-' '_')
  case "$suite" in
  */* | *.toml)
    path=$(from_base "$suite")
    if [ -n "$path" ]; then changed "$suite"; else
      path=$(realpath -- "$suite")
      [ -n "$base_sha" ] && echo "- \`$suite\` is new in this pull request: it was judged by its own." >>"$out/notes.md"
    fi ;;
  *) path="$suite" ;;
  esac
  printf '%s\t%s\n' "$name" "$path" >>"$out/suites.tsv"
done
[ -n "$base_sha" ] && echo "servegate: base $base ($base_sha) vs head $HEAD_REF ($head_sha)"
cat "$out/notes.md"
