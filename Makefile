# memory_chain: `make serve` runs the server on the embedded defaults, `make test` the tests.
# Both set everything up first (scripts/setup.sh); settings come from MEMORY_CHAIN_* or .env.
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist workers for `make test`, each test file whole on one worker (its module
# fixtures, a server or Open WebUI, start once; each worker has its own PostgreSQL, embedding
# model and embedded LLM). On 2 cores, 2 workers ran a server-heavy subset (143 tests) in
# 0.68-0.73 of the time of one process on a near-idle machine, 0.58-0.87 at a load of 6-10,
# and no faster at 15+. 0 runs the tests in one process.
TEST_WORKERS ?= 2
# Files whose tests share one node id (schemathesis: an item per API operation), which xdist
# would run once: they run after, in one process (tests/conftest.py refuses them under xdist).
ONE_PROCESS_TESTS := tests/api/test_fuzz_api.py

.PHONY: setup setup-test serve test lint check bench clean

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh --test

serve: setup
	$(BIN)/memory-chain serve

# ruff and mypy on an environment set up by `setup` or `setup-test`.
check:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

lint: setup
	@$(MAKE) --no-print-directory check

test: setup-test
	@$(MAKE) --no-print-directory check
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15 \
		$(addprefix --ignore=,$(ONE_PROCESS_TESTS))
	$(BIN)/python -m pytest --durations=5 $(ONE_PROCESS_TESTS)
