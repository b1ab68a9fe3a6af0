#!/bin/sh
# The GPU check: what this repository cannot measure on its CPU-only machine, in one script
# of minutes on a machine with an NVIDIA GPU. From the repository root:
#     sh scripts/gpu_check.sh [--dry-run] [HARDWARE] [OUT_DIR]
# HARDWARE is a key of engine/sim/data/hardware.toml (default h200) for the roofline's check;
# OUT_DIR defaults to results/DATE-gpu-check. It installs the engine with a CUDA torch (what
# scripts/install.sh takes where nvidia-smi is) and nvidia-ml-py (the `gpu` extra), tries MLX's
# CUDA build (the `cuda` extra; its failure is said, not fatal), then:
#   1. the machine: nvidia-smi's GPUs, lscpu's model and flags;
#   2. the engine's tests on CUDA (ENGINE_DEVICE=cuda; the SmolLM2 ones included);
#   3. the README's A/A of the reference engine, with device memory from NVML per phase;
#   4. the boundary-spill seed: its default against a cap that spills (docs/seeds.md);
#   5. the simulator's roofline against the engine's measured steps (scripts/sim_gpu_check.sh);
#   6. the client on the machine's cores: tokens/s read, and the read lag against the server's
#      write stamps, with 1, 2, 4 and 8 client processes (scripts/client_limits.py).
# Each step's output lands in OUT_DIR (a log per step, the reports beside them); a step that
# fails is said and the next one runs; the exit code is the number of failed steps.
# --dry-run prints the commands without running them (CI runs it: the script stays runnable).
set -u
dry=""
[ "${1:-}" = "--dry-run" ] && { dry=1; shift; }
hw=${1:-h200}
out=${2:-results/$(date -u +%Y-%m-%d)-gpu-check}
failed=0

step() {  # step NAME COMMAND...: run it (or print it), its output in OUT_DIR/NAME.log
    name=$1
    shift
    if [ -n "$dry" ]; then
        echo "[$name] $*"
        return 0
    fi
    echo "== $name: $*"
    if "$@" >"$out/$name.log" 2>&1; then
        echo "   ok ($out/$name.log)"
    else
        echo "   FAILED ($out/$name.log): $(tail -n 3 "$out/$name.log" | tr '\n' ' ')"
        failed=$((failed + 1))
    fi
}

if [ -z "$dry" ]; then
    command -v nvidia-smi >/dev/null 2>&1 || { echo "gpu_check: no nvidia-smi: not a GPU machine"; exit 2; }
    mkdir -p "$out"
fi
step install sh scripts/install.sh --test
step install-nvml .venv/bin/python -m pip install -q -e ".[gpu]"
step install-mlx-cuda .venv/bin/python -m pip install -q -e ".[cuda]"
step machine sh -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; lscpu'
step cuda .venv/bin/python -c "import torch, pynvml; assert torch.cuda.is_available(); pynvml.nvmlInit(); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
step engine-tests env ENGINE_DEVICE=cuda .venv/bin/python -m pytest -q tests/engine -p no:cacheprovider
step aa env ENGINE_DEVICE=cuda .venv/bin/harness ab --base HEAD --head HEAD --out-dir "$out"
step boundary-spill env ENGINE_DEVICE=cuda .venv/bin/harness ab --base HEAD --head HEAD \
    --suite boundary-spill --head-flags "--max-batch-prefill-tokens 2048" --out-dir "$out"
step roofline sh scripts/sim_gpu_check.sh "$hw" "$out/sim"
step client-scaling .venv/bin/python scripts/client_limits.py --procs 1 2 4 8 \
    --streams 64 256 512 --itl-ms 2 --tokens 200 --out "$out/client-limits.json"
[ -n "$dry" ] || echo "gpu_check: $failed step(s) failed; figures in $out"
exit "$failed"
