#!/usr/bin/env bash
# Install Open WebUI (PyPI's open-webui, pinned) in a virtualenv of its own, for the browser
# tests that drive a real Open WebUI against memory_chain (tests/webui/). Called by
# `scripts/setup.sh --test`; runs alone too.
#
# The virtualenv is kept under ~/.cache/memory_chain (OPEN_WEBUI_VENV to move it), outside
# the work tree, so a new clone or a `make clean` reuses it. It is about 3 GB: torch 2.13.0
# (CPU) goes in first, because Open WebUI's own requirements (sentence-transformers,
# accelerate, faster-whisper) would otherwise resolve torch to a multi-GB CUDA build.
#
# Idempotent: a venv whose stamp matches this script does nothing but the check.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OPEN_WEBUI_VERSION=0.12.4
TORCH_VERSION=2.13.0
CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
VENV=${OPEN_WEBUI_VENV:-$CACHE_HOME/memory_chain/open-webui-$OPEN_WEBUI_VERSION}

log() { printf '[setup-open-webui] %s\n' "$*" >&2; }

stamp="$VENV/.memory_chain-installed"
want="$(sha256sum scripts/setup-open-webui.sh | cut -c1-16)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$VENV/bin/open-webui" ]]; then
    log "Open WebUI $OPEN_WEBUI_VERSION up to date ($VENV)"
    exit 0
fi

# open-webui 0.12.4 supports Python 3.11 and 3.12 only.
if ! "$PYTHON" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))'; then
    log "open-webui $OPEN_WEBUI_VERSION needs Python 3.11 or 3.12; $PYTHON is $("$PYTHON" --version 2>&1): set PYTHON=python3.11"
    exit 1
fi

started=$SECONDS
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV with $($PYTHON --version)"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
    log "installing torch==$TORCH_VERSION (CPU) into the Open WebUI venv"
    "${PIP[@]}" install "torch==$TORCH_VERSION"
fi
log "installing open-webui==$OPEN_WEBUI_VERSION (about 3 GB with torch; a few minutes)"
"${PIP[@]}" install "open-webui==$OPEN_WEBUI_VERSION" "torch==$TORCH_VERSION"
echo "$want" > "$stamp"
log "done in $((SECONDS - started)) s: $(du -sh "$VENV" | cut -f1) in $VENV"
