#!/bin/sh
# `harness sweep --find-capacity` against servers with a known limit (results/README.md):
#   sh results/2026-12-04-sweep-capacity/run.sh   (from the repository root, nothing else running)
# The scripted server serves at most N streams at once, 150 ms each (50 ms to the first token,
# then 5 x 20 ms); the suite's SLO is TTFT <= 150 ms, so N clients meet it and N + 1 do not.
# Base serves 8 streams, head 6: the levels 1, 2, 4 pass (both serve them alike) and the
# capacity, searched after the levels on every cold server, regresses (exit 1).
set -u
HERE=results/2026-12-04-sweep-capacity
H=${HARNESS:-.venv/bin/harness}
TMP=$(mktemp -d)
S="{python} $PWD/tests/helpers/scripted_server.py --port {port} --model scripted --ttft-ms 50 --itl-ms 20"
t0=$(date +%s)
"$H" sweep --quiet --suite "$HERE/limit.toml" --levels 1,2,4 --rounds 3 --find-capacity \
  --base-cmd "$S --max-streams 8" --head-cmd "$S --max-streams 6" --out-dir "$TMP" \
  > "$HERE/sweep.log" 2>&1
echo "sweep: exit $?, $(( $(date +%s) - t0 )) s" | tee -a "$HERE/sweep.log"
cp "$TMP"/*.md "$TMP"/*.png "$TMP"/*[0-9a-z].json "$HERE/" 2>/dev/null
lscpu | grep -E "Model name|Flags" | sed 's/^/# /' >> "$HERE/sweep.log"
