# `make run` executes every notebook into runs/<timestamp>/ and writes the report;
# `make test` runs the test suite. Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BROWSER := $(VENV)/.browser
ARGS ?=

.PHONY: run test check lint lab report clean-venv

$(STAMP): pyproject.toml constraints-cpu.txt scripts/setup-venv.sh scripts/setup-nbstripout.sh
	VENV=$(VENV) scripts/setup-venv.sh
	touch $(STAMP)

# Chromium for the browser test (apt where the machine allows it; otherwise the test says why it skips).
$(BROWSER): scripts/setup-browser.sh | $(STAMP)
	scripts/setup-browser.sh
	touch $(BROWSER)

run: $(STAMP)
	$(PY) -m repro run $(ARGS)

# Everything CI runs: lint, format, every test (notebooks through papermill and the browser check included).
test: lint $(BROWSER)
	$(PY) -m pytest $(ARGS)

# The fast lane: lint and the unit tests; no notebook runs, no end-to-end CLI, git or browser tests.
check: lint
	$(PY) -m pytest -q -m "not notebook and not gpu and not integration" $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests scripts
	$(VENV)/bin/ruff format --check src tests scripts

# Jupyter refuses to serve as root (containers) unless told; the notebooks need no other privilege.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

report: $(STAMP)
	$(PY) -m repro report runs/latest

clean-venv:
	rm -rf $(VENV)
