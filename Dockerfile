# memory_chain API image, CPU only. Build: docker build -t memory-chain .
#
# torch comes from PyTorch's CPU wheel index (PyPI's Linux wheel is the CUDA build, several GB
# more); every other package from PyPI, pinned by requirements/constraints.txt. The image runs
# as the unprivileged user `memory`, keeps its data in the /app/data volume, and reports its
# health from GET /health.
FROM python:3.11-slim

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 OMP_WAIT_POLICY=PASSIVE \
    MEMORY_CHAIN_DATA_DIR=/app/data MEMORY_CHAIN_SERVER_HOST=0.0.0.0 \
    XDG_CACHE_HOME=/tmp/cache HF_HOME=/tmp/cache/huggingface
WORKDIR /app

# torch first, alone and pinned: resolved as a plain dependency it would be PyPI's CUDA build.
RUN pip install --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}"

COPY pyproject.toml README.md ./
COPY requirements ./requirements
COPY memory_chain ./memory_chain
COPY server.py ./
RUN pip install -c requirements/constraints.txt . \
    && python -c "import torch, sys; sys.exit(torch.version.cuda is not None)"

# An unprivileged user owns only the data folder (a named volume mounted there starts with
# this ownership).
RUN useradd --system --uid 10001 --user-group --home-dir /app --no-create-home memory \
    && mkdir -p /app/data \
    && chown memory:memory /app/data
USER 10001:10001

VOLUME ["/app/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('MEMORY_CHAIN_SERVER_PORT', '8000'), timeout=4)"]
CMD ["memory-chain", "serve"]
