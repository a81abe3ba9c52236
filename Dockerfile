# memory_chain API image. Build: docker build -t memory-chain .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 OMP_WAIT_POLICY=PASSIVE \
    MEMORY_CHAIN_DATA_DIR=/app/data MEMORY_CHAIN_SERVER_HOST=0.0.0.0
WORKDIR /app

# torch first and pinned: resolved as a plain dependency it would pull a newer CUDA build.
# For a smaller CPU-only image, pass PyTorch's CPU wheel index with
# --build-arg PIP_EXTRA_INDEX_URL=...
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install "torch==2.13.0"

COPY pyproject.toml README.md ./
COPY requirements ./requirements
COPY memory_chain ./memory_chain
COPY server.py ./
RUN pip install -c requirements/constraints.txt .

VOLUME ["/app/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"
CMD ["memory-chain", "serve"]
