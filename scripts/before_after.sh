#!/bin/sh
# The README's A/B (`harness ab --base main --head HEAD`) run by two harnesses in turn, the one
# at BEFORE (a commit, checked out beside the repository) and this tree's, on the same engine
# commits: a change to the harness that keeps behaviour gives the same verdict. Writes each
# run's output under OUT (default /tmp/before-after) and prints one line per harness.
#   sh scripts/before_after.sh BEFORE [OUT]
set -u
before=$1
out=${2:-/tmp/before-after}
repo=$(git rev-parse --show-toplevel)
rm -rf "$out" && mkdir -p "$out"
git -C "$repo" worktree add -q "$out/harness-before" "$before"
for side in before after; do
  tree=$repo
  [ "$side" = before ] && tree=$out/harness-before
  mkdir -p "$out/$side"
  start=$(date +%s)
  # run as `python -m harness` would, without the current folder first on sys.path
  (cd "$repo" && PYTHONPATH=$tree "$repo/.venv/bin/python" -c \
    "import sys, runpy; del sys.path[0]; runpy.run_module('harness', run_name='__main__')" \
    ab --base main --head HEAD --out-dir "$out/$side" >"$out/$side/stdout.txt" 2>"$out/$side/stderr.txt")
  echo "$side: exit $? in $(($(date +%s) - start)) s: $(grep '^verdict' "$out/$side/stdout.txt")"
done
git -C "$repo" worktree remove --force "$out/harness-before"
