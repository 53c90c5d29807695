# Two commands on a fresh machine: `make demo` and `make test`. Everything else is a step they take.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat requirements-dev.txt pyproject.toml | sha256sum | cut -c1-12)

.PHONY: venv jars demo test test-unit lint fmt bench chaos stack-up stack-down clean

$(STAMP): requirements-dev.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@rm -f $(VENV)/.installed-*
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==25.3
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

venv: $(STAMP)  ## Python environment with every pinned dependency and the package (editable)

jars: venv  ## fetch and verify the JVM jars of src/kafka_iceberg/jars.lock.toml into the cache, record the JVM's class archive
	@$(BIN)/kafka-iceberg jars fetch > /dev/null
	@$(BIN)/kafka-iceberg jars verify
	@$(BIN)/kafka-iceberg jars archive > /dev/null || echo "local Spark sessions will start without a class-data archive (slower)"

demo: jars  ## run the main job on the embedded local stack and show the result
	$(BIN)/kafka-iceberg demo

lint: venv  ## ruff and mypy (strict) on the package
	$(BIN)/ruff check src tests benchmarks resources
	$(BIN)/ruff format --check src tests benchmarks resources
	$(BIN)/mypy

fmt: venv
	$(BIN)/ruff format src tests benchmarks resources
	$(BIN)/ruff check --fix src tests benchmarks resources

# Test files run on this many pytest-xdist workers, each with its own local stack and Spark session
# (docs/local-stack.md, "Two test workers"); TEST_WORKERS=0 runs them in this process, one by one.
# Whole files, in the order tests/conftest.py gives them (xdist would hand out the most numerous first).
TEST_WORKERS ?= 2
TEST_DIST    := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: jars lint  ## the whole suite: unit and integration tests against the local stack
	$(BIN)/pytest $(TEST_DIST)

test-unit: jars  ## only the tests that need no local stack
	$(BIN)/pytest -m "not integration"

bench: jars  ## throughput, overhead, freshness and file layout against baselines (docs/benchmarks/)
	$(PY) benchmarks/run.py

SEEDS   ?= 20
READER  ?= both
RECORDS ?= 200000
WRITER  ?= auto
chaos: jars  ## the crash test for many seeds (SEEDS=20 READER=spark|direct|both RECORDS=200000 WRITER=auto|spark|arrow [FIRST_SEED=n]), each seed's outcome
	$(PY) -m tests.e2e.chaos --seeds $(SEEDS) --reader $(READER) --records $(RECORDS) --writer $(WRITER) $(if $(FIRST_SEED),--first-seed $(FIRST_SEED))

stack-up: venv
	$(BIN)/kafka-iceberg local up

stack-down: venv
	$(BIN)/kafka-iceberg local down

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
