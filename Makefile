# Every target creates the virtual environment and installs dq-agent into it when missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench bench-quality sample clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# Bytecode written now: an editable install never gets it where PYTHONDONTWRITEBYTECODE is
	# set, and then every run compiles the package again (0.3 s). Stale files are recompiled.
	$(BIN)/python -m compileall -q dq_agent
	touch $@

# The sample has faults on purpose: exit 1 (verdict at or above --fail-on) is an expected
# result, so only codes above 1 (a real error) fail the target.
demo: install
	$(BIN)/dq-agent inspect sample_data/sensors.parquet; code=$$?; [ $$code -le 1 ]

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check dq_agent tests sample_data bench
	$(BIN)/ruff format --check dq_agent tests sample_data bench
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/bench.py
	$(BIN)/python -m bench.big

# False alarms on clean data and detection of injected faults (a few minutes; not a test).
# Options: make bench-quality ARGS="--quick --seed 5".
bench-quality: install
	$(BIN)/python -m bench.quality $(ARGS)

sample: install
	$(BIN)/python sample_data/generate.py

clean:
	rm -rf $(VENV) bench_data .pytest_cache .mypy_cache .ruff_cache
