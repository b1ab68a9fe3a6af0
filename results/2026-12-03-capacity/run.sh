#!/bin/sh
# The capacity search against servers with a known limit (results/README.md):
#   sh results/2026-12-03-capacity/run.sh        (from the repository root, nothing else running)
# 1. open loop, 8 streams of 150 ms: the rate where a 150 ms TTFT limit breaks, and the time taken
# 2. closed loop: the search ends on [N, N + 1] for N = 8 and N = 6
# 3. an A/B of 8 streams against 6: exit 1 on capacity_req_s
# Each run's search goes to searches.json (the raw runs stay in a temporary folder).
set -u
HERE=results/2026-12-03-capacity
H=${HARNESS:-.venv/bin/harness}
TMP=$(mktemp -d)
S="{python} $PWD/tests/helpers/scripted_server.py --port {port} --model scripted --ttft-ms 50 --itl-ms 20"
run() {  # $1 suite, $2 streams, $3 name
  t0=$(date +%s)
  "$H" run --quiet --suite "$HERE/$1.toml" --serve-cmd "$S --max-streams $2" --out "$TMP/$3.json" \
    >"$TMP/$3.log" 2>&1
  echo "$3: exit $?, $(( $(date +%s) - t0 )) s"
}
run rate-limit 8 rate-8
run concurrency-limit 8 concurrency-8
run concurrency-limit 6 concurrency-6
t0=$(date +%s)
"$H" ab --quiet --suite $HERE/concurrency-limit.toml --base-cmd "$S --max-streams 8" \
  --head-cmd "$S --max-streams 6" --rounds 3 --max-rounds 3 --out-dir "$TMP/ab" > $HERE/ab.log 2>&1
echo "ab: exit $?, $(( $(date +%s) - t0 )) s"
cp "$TMP"/ab/*.md "$TMP"/ab/*.png "$TMP"/ab/*[0-9a-f].json "$HERE/" 2>/dev/null
python3 - "$TMP" "$HERE/searches.json" <<'PY'
import json, sys, pathlib
tmp, out = pathlib.Path(sys.argv[1]), sys.argv[2]
runs = {p.stem: json.loads(p.read_text())["runs"][0] for p in sorted(tmp.glob("*.json"))}
searches = {k: {"duration_s": r["duration_s"], "valid": r["valid"], "capacity": r["capacity"]}
            for k, r in runs.items()}
machine = runs[next(iter(runs))]["machine"]
json.dump({"date": runs[next(iter(runs))]["started_at"], "machine": machine,
           "searches": searches}, open(out, "w"), indent=1)
for k, r in runs.items():
    c = r["capacity"]
    print(k, [(lv["level"], lv["attained"]) for lv in c["levels"]], "->", c["met_level"],
          c["missed_level"], c["capacity_req_s"])
PY
