# memory_chain: `make serve` runs the server on the embedded defaults, `make test` the tests.
# Both set everything up first (scripts/setup.sh); settings come from MEMORY_CHAIN_* or .env.
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-test serve test lint bench clean

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh --test

serve: setup
	$(BIN)/memory-chain serve

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: setup-test lint
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python benchmarks/bench_tiers.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
