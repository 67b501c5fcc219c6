# `make run` executes every notebook into runs/<timestamp>/ and writes the report;
# `make test` runs the code's tests; `make audit` checks the committed evidence against today's code. Each creates
# .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BROWSER := $(VENV)/.browser
MERMAID := $(VENV)/.mermaid
ARGS ?=
# Python writes the bytecode of what it imports, as it does by default (into .venv and __pycache__/, both ignored):
# a test session starts some two hundred Python processes, and with PYTHONDONTWRITEBYTECODE set each would compile
# every module it imports again.
unexport PYTHONDONTWRITEBYTECODE
# `make test` runs on this many pytest-xdist workers (the shared CPU run of tests/conftest.py is made once for all,
# in the background while the workers run the other tests). `--dist loadgroup` (tests/scheduling.py): a test at a
# time to whichever worker is free, longest first, so that the workers end together; the tests that share a fixture
# of their module go to one worker together.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: run test audit check lint lab report clean-venv

$(STAMP): pyproject.toml constraints-cpu.txt scripts/setup-venv.sh scripts/setup-nbstripout.sh
	VENV=$(VENV) scripts/setup-venv.sh
	touch $(STAMP)

# Chromium for the browser audit (apt where the machine allows it; otherwise the test says why it skips).
$(BROWSER): scripts/setup-browser.sh | $(STAMP)
	scripts/setup-browser.sh
	touch $(BROWSER)

run: $(STAMP)
	$(PY) -m repro run $(ARGS)

# Mermaid's browser build for the browser audit of pr-comment.md's charts (npm where there is one; else it skips).
$(MERMAID): scripts/setup-mermaid.sh | $(STAMP)
	VENV=$(VENV) scripts/setup-mermaid.sh
	touch $(MERMAID)

# The code's tests: lint, format and every test of the code (notebooks through papermill included), not the audit.
test: lint
	$(PY) -m pytest $(XDIST) -m "not audit" $(ARGS)

# The audit of committed evidence (tests marked `audit`): every committed report re-rendered and compared, the H200
# and tuning evidence re-read by today's rules, data/patches/ re-made, the reports in Chromium with Mermaid's charts.
# CI runs it after `make test`.
audit: $(STAMP) $(BROWSER) $(MERMAID)
	$(PY) -m pytest $(XDIST) -m audit $(ARGS)

# The fast lane: lint and the unit tests; no notebook runs, no end-to-end CLI, git or browser tests, no audit.
check: lint
	$(PY) -m pytest -q $(XDIST) -m "not notebook and not gpu and not integration and not audit" $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests scripts examples upstream-tests
	$(VENV)/bin/ruff format --check src tests scripts examples upstream-tests

# Jupyter refuses to serve as root (containers) unless told; the notebooks need no other privilege.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

report: $(STAMP)
	$(PY) -m repro report runs/latest

clean-venv:
	rm -rf $(VENV)
