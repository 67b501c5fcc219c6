# `make run` executes every notebook into runs/<timestamp>/ and writes the report;
# `make test` runs the test suite. Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test lab report clean-venv

$(STAMP): pyproject.toml constraints-cpu.txt scripts/setup-venv.sh
	VENV=$(VENV) scripts/setup-venv.sh
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m repro run $(ARGS)

test: $(STAMP)
	$(PY) -m pytest $(ARGS)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

report: $(STAMP)
	$(PY) -m repro report runs/latest

clean-venv:
	rm -rf $(VENV)
