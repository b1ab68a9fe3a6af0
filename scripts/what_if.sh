#!/bin/sh
# The what-if tables of docs/simulation.md: Llama-3.1-8B through this engine's scheduler, priced
# by the roofline of each machine (no GPU, no weights needed; seconds each).
#     sh scripts/what_if.sh [OUT_DIR]      # default results/<today>-what-if
set -eu
out=${1:-results/$(date -u +%Y-%m-%d)-what-if}
h=.venv/bin/harness
for hw in h200 m1-ultra; do
    echo "== $hw: boundary spill (cap 2048 vs 4096), 4 x 520-token prompts, 128 output tokens"
    $h ab --quiet --sim "$hw:llama-3.1-8b" --suite boundary-spill --base HEAD --head HEAD \
        --head-flags "--max-batch-prefill-tokens 2048" --max-tokens 128 --out-dir "$out/$hw" || true
    echo "== $hw: 1 and 4 clients, 512-token prompts, 128 output tokens"
    $h sweep --quiet --sim "$hw:llama-3.1-8b" --suite serving-defaults --levels 1,4 \
        --out-dir "$out/$hw"
done
