#!/bin/sh
# Where the reference engine's time goes on a GPU, in about three minutes: py-spy over the engine
# serving SmolLM2's shape (scripts/shape_model.py) on CUDA, one sequence (`engine generate`) and
# eight streams at once (`engine serve`), then the engine tests on CUDA stopped by SIGINT at a
# time limit so that pytest still prints its failures. Offline, as scripts/gpu_check.sh; py-spy
# travels as a wheel in .gpu/wheels. From the repository root:  sh scripts/gpu_profile.sh OUT_DIR
set -u
py=${PYTHON:-python3}
out=${1:?OUT_DIR}
shape=$PWD/.gpu/smollm2-shape
mkdir -p "$out"
"$py" -m pip install -q --no-index --no-deps --no-build-isolation -e . .gpu/wheels/*.whl >"$out/install.log" 2>&1
spy=$(dirname "$(command -v "$py")")/py-spy
[ -f "$shape/model.safetensors" ] || "$py" scripts/shape_model.py weights "$shape"
export ENGINE_DEVICE=cuda PYTHONUNBUFFERED=1
echo "== one sequence, 400 tokens"
timeout 90 "$spy" record -r 200 -f raw -o "$out/generate.txt" -- "$py" -m engine.cli generate \
    --model "$shape" --max-tokens 400 --no-chat "Once upon a time" >"$out/generate.log" 2>&1
tail -n 2 "$out/generate.log"
echo "== eight streams against engine serve, 20 s"
"$py" -m engine.cli serve --model "$shape" --port 8123 >"$out/serve.log" 2>&1 &
pid=$!
"$py" - "$out" "$spy" "$pid" <<'PY'
import asyncio, json, subprocess, sys, time, urllib.request
out, spy, pid = sys.argv[1:]
for _ in range(240):
    try:
        urllib.request.urlopen("http://127.0.0.1:8123/health", timeout=1); break
    except Exception:
        time.sleep(0.25)
import aiohttp
rec = subprocess.Popen([spy, "record", "-r", "200", "-f", "raw", "-d", "15", "-o", f"{out}/serve8.txt", "--pid", pid])
async def stream(s, n):
    body = {"model": "m", "prompt": "Once upon a time", "max_tokens": 300, "ignore_eos": True, "stream": True}
    async with s.post("http://127.0.0.1:8123/v1/completions", json=body) as r:
        async for line in r.content:
            n[0] += line.startswith(b"data: {")
async def main():
    n, t0 = [0], time.monotonic()
    async with aiohttp.ClientSession() as s:
        while time.monotonic() - t0 < 20:
            await asyncio.gather(*(stream(s, n) for _ in range(8)))
    print(f"8 streams: {n[0] / (time.monotonic() - t0):.0f} tok/s over {time.monotonic() - t0:.1f} s")
asyncio.run(main())
rec.wait()
PY
kill "$pid"; wait "$pid" 2>/dev/null
echo "== engine tests on CUDA (SIGINT at 110 s)"
no_openai=$("$py" -c "import openai" 2>/dev/null || echo --ignore=tests/engine/test_serve_api.py)
timeout -s INT -k 15 110 "$py" -m pytest -q tests/engine -p no:cacheprovider -n 8 --timeout 60 \
    -rfE --tb=line $no_openai \
    --deselect tests/engine/test_cpu_kernels.py::test_bad_lengths_and_head_sizes_raise_instead_of_reading_past_the_pool \
    >"$out/engine-tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/engine-tests.txt" | cut -c1-220 | tail -n 40
