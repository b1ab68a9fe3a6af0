#!/bin/sh
# The roofline's check on a GPU machine (docs/simulation.md): measure the reference engine's
# steps on CUDA, then price the same steps and suites with the roofline of that hardware and
# with a cost model fitted there. Run from the repository root on the GPU machine, after
# `sh scripts/install.sh --test` (with a CUDA torch):
#     sh scripts/sim_gpu_check.sh h200 [OUT_DIR]
# Prints the per-step error of the roofline (HARDWARE:smollm2-135m:bf16, the only weights this
# project ships) and the suites' simulated-vs-real table for both cost models; leaves the step
# trace, the fitted cost model and both tables in OUT_DIR (default results/gpu-check).
# PYTHON (default .venv/bin/python) runs the harness; SIM_SUITES and SIM_LEVELS (default the four
# suites below, levels 1,4,16) shorten the tables (scripts/gpu_check.sh does).
set -eu
hw=${1:?hardware key from engine/sim/data/hardware.toml, e.g. h200}
out=${2:-results/gpu-check}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
$py -c "import torch; assert torch.cuda.is_available(), 'no CUDA torch'; print(torch.__version__)"
export ENGINE_DEVICE=cuda ENGINE_DTYPE=bfloat16
$py -m harness.cli.main sim calibrate --quiet --out "$out/costs-fitted.json" \
    --steps "$out/steps.jsonl"
$py -m engine.sim score "$out/steps.jsonl" --costs "$hw:smollm2-135m:bf16" |
    tee "$out/roofline-score.json"
suites="" levels=${SIM_LEVELS:-1,4,16}
for s in ${SIM_SUITES:-single-client short-concurrency boundary-spill prefill-storm}; do
    suites="$suites --suite $s"
done
$py -m harness.cli.main sim validate --quiet --costs "$hw:smollm2-135m:bf16" $suites \
    --levels "$levels" --out "$out/validate-roofline.md"
$py -m harness.cli.main sim validate --quiet --costs "$out/costs-fitted.json" $suites \
    --levels "$levels" --out "$out/validate-fitted.md"
