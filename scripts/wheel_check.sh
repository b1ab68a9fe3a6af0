#!/usr/bin/env bash
# servegate installed from its wheel alone, as a team without a package index would: build the
# wheel, install it with the `pytest` extra into a fresh virtual environment (dependencies from
# pip's configured sources), then, in a folder outside this repository, run
# docs/examples/test_serving.py with that environment's pytest against the scripted test server
# (an A/A that must pass, a 2x slower head that must fail the test) and `pytest-benchmark
# compare` on what the passing run saved. Writes OUT/README.md (default
# results/<today>-wheel-install/): the commands, versions, CPU and what passed. Exit 0 when all did.
#
#   bash scripts/wheel_check.sh [OUT]        PYTHON=python3.12 bash scripts/wheel_check.sh
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$REPO/results/$(date +%F)-wheel-install}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT" "$WORK/run"
unset PYTHONPATH  # the fresh environment's harness, never this checkout's

step() { printf '%s\n' "$*" >&2; }
fail() { step "FAILED: $1 (log: $2)"; tail -n 30 "$2" >&2; exit 1; }

step "building the wheel"
"$PYTHON" -m pip wheel --no-deps -q -w "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 ||
    fail "pip wheel" "$WORK/build.log"
WHEEL=$(ls "$WORK"/dist/servegate-*.whl)

step "installing $(basename "$WHEEL")[pytest] into a fresh venv"
"$PYTHON" -m venv "$WORK/venv"
VENV=$WORK/venv/bin
start=$(date +%s)
"$VENV/pip" install -q "$WHEEL[pytest]" >"$WORK/install.log" 2>&1 || fail "pip install" "$WORK/install.log"
install_s=$(( $(date +%s) - start ))
TORCH=$("$VENV/python" -c "import importlib.util as u; print('absent' if u.find_spec('torch') is None else 'present')")

cd "$WORK/run"
FROM=$("$VENV/python" -c "import harness; print(harness.__file__)")
cp "$REPO/docs/examples/test_serving.py" "$REPO/tests/helpers/scripted_server.py" .
cat >t.toml <<'EOF'
model = "scripted"
[[phase]]
name = "load"
clients = 2
requests = 6
prompt_tokens = 8
max_tokens = 4
[gate]
ttft_p50_ms = 0.2
EOF
export SERVEGATE_SUITE=t.toml
export SERVEGATE_BASE_CMD="{python} scripted_server.py --port {port} --ttft-ms 50 --tag a"
example() {  # the example with the head's TTFT in ms; its pytest's summary line and exit code
    SERVEGATE_HEAD_CMD="{python} scripted_server.py --port {port} --ttft-ms $1" \
        "$VENV/pytest" -p no:cacheprovider -q test_serving.py >"$WORK/example-$1.log" 2>&1
}
step "the example: A/A"
aa_rc=0; example 50 || aa_rc=$?
aa_line=$(tail -n 1 "$WORK/example-50.log")
step "the example: head 2x slower"
slow_rc=0; example 100 || slow_rc=$?
slow_line=$(tail -n 1 "$WORK/example-100.log")
slow_why=$(grep -m1 "where 'REGRESSION'" "$WORK/example-100.log" | sed 's/^E *//; s/; report .*>/>/' || true)

step "pytest-benchmark list / compare"
"$VENV/pytest-benchmark" list >"$WORK/list.log" 2>&1 || fail "pytest-benchmark list" "$WORK/list.log"
cmp_rc=0
"$VENV/pytest-benchmark" compare --columns=min,median,max,rounds --group-by=group \
    -k ttft_p50_ms >"$WORK/compare.log" 2>&1 || cmp_rc=$?
saved=$(sed "s|$WORK/run/||" "$WORK/list.log")

ok() { [ "$1" = "$2" ] && echo "passed" || echo "FAILED (exit $1, expected $2)"; }
verdict_aa=$(ok "$aa_rc" 0)
verdict_slow=$(ok "$slow_rc" 1)
verdict_cmp=$(ok "$cmp_rc" 0)
grep -q "test_head_serves_no_slower_than_base\[head-ttft_p50_ms\]" "$WORK/compare.log" ||
    verdict_cmp="FAILED (the head's ttft_p50_ms is not in the table)"
[ "$TORCH" = absent ] && verdict_torch=passed || verdict_torch="FAILED (torch was installed)"
case $FROM in "$WORK/venv/"*) verdict_from=passed ;; *) verdict_from="FAILED ($FROM)" ;; esac

versions=$("$VENV/pip" list --format=freeze 2>/dev/null |
    grep -iE '^(servegate|pytest|pytest-benchmark|numpy|aiohttp|click)==' | tr '\n' ' ')
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
flags=$(lscpu 2>/dev/null | sed -n 's/^Flags: *//p' | tr ' ' '\n' |
    grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512[a-z_0-9]*|amx[a-z_0-9]*|asimd|sve)$' | paste -sd, -)

cat >"$OUT/README.md" <<EOF
# servegate from its wheel, into a fresh venv ($(date +%F))

\`bash scripts/wheel_check.sh\` on $(uname -sm), CPU $cpu ($(nproc) cores; vector flags: ${flags:-none
listed}), $("$PYTHON" --version), commit $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown).

\`\`\`sh
$PYTHON -m pip wheel --no-deps -w dist .                # $(basename "$WHEEL")
$PYTHON -m venv venv && venv/bin/pip install "dist/$(basename "$WHEEL")[pytest]"   # ${install_s} s
cd elsewhere   # test_serving.py (docs/examples), scripted_server.py (tests/helpers), t.toml
SERVEGATE_SUITE=t.toml SERVEGATE_BASE_CMD="{python} scripted_server.py --port {port} --ttft-ms 50 --tag a" \\
  SERVEGATE_HEAD_CMD="{python} scripted_server.py --port {port} --ttft-ms 50" venv/bin/pytest test_serving.py
SERVEGATE_HEAD_CMD="... --ttft-ms 100" venv/bin/pytest test_serving.py      # head 2x slower
venv/bin/pytest-benchmark list
venv/bin/pytest-benchmark compare --columns=min,median,max,rounds --group-by=group -k ttft_p50_ms
\`\`\`

Installed: $versions(pip's configured sources); the harness ran from the venv
(\`${FROM#"$WORK/"}\`); torch $TORCH.

| check | result |
|---|---|
| the wheel installs without torch | $verdict_torch |
| the harness runs from the venv, not a checkout | $verdict_from |
| A/A: the example passes (exit 0) | $verdict_aa: \`$aa_line\` |
| head 2x slower: the example fails (exit 1) | $verdict_slow: \`$slow_line\` |
| \`pytest-benchmark compare\` tables the saved run | $verdict_cmp |

The failed assertion, as pytest printed it:
\`\`\`
$slow_why
\`\`\`

\`pytest-benchmark list\` (the A/A's run; the failing test saved one too):
\`\`\`
$saved
\`\`\`

\`pytest-benchmark compare ... -k ttft_p50_ms\` (times in ms as it scales them; one round per cold server):
\`\`\`
$(grep -v '^$' "$WORK/compare.log" | sed "s|$WORK/run/||")
\`\`\`
EOF
step "wrote $OUT/README.md"
for v in "$verdict_torch" "$verdict_from" "$verdict_aa" "$verdict_slow" "$verdict_cmp"; do
    [ "$v" = passed ] || exit 1
done
