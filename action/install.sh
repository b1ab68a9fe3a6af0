#!/usr/bin/env bash
# The harness alone (no torch, no engine extra) from the action's own checkout, in its own
# virtual environment; or the one the `harness` input names.
set -euo pipefail
out="$RUNNER_TEMP/servegate"
mkdir -p "$out"
if [ -n "$HARNESS" ]; then
  bin=$(cd "$(dirname "$(command -v "$HARNESS")")" && pwd)
else
  venv="$RUNNER_TEMP/servegate-venv"
  "$PYTHON" -m venv "$venv"
  spec="$GITHUB_ACTION_PATH"
  [ -n "$EXTRAS" ] && spec="$spec[$EXTRAS]"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
  bin="$venv/bin"
fi
"$bin/harness" --version
{
  echo "SERVEGATE_BIN=$bin"
  echo "SERVEGATE_OUT=$out"
} >>"$GITHUB_ENV"
