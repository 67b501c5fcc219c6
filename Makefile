# `make run` executes every notebook into runs/<timestamp>/ and writes the report;
# `make test` runs the test suite. Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test check lint lab report clean-venv

$(STAMP): pyproject.toml constraints-cpu.txt scripts/setup-venv.sh
	VENV=$(VENV) scripts/setup-venv.sh
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m repro run $(ARGS)

# Everything CI runs: lint, format, every test (notebooks through papermill included).
test: lint
	$(PY) -m pytest $(ARGS)

# The fast lane: lint and the unit tests, no notebook runs (under a minute on 2 cores).
check: lint
	$(PY) -m pytest -q -m "not notebook and not gpu" $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests scripts
	$(VENV)/bin/ruff format --check src tests scripts

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

report: $(STAMP)
	$(PY) -m repro report runs/latest

clean-venv:
	rm -rf $(VENV)
