# The two commands that matter:
#   make lab    set everything up (venv, packages, Kafka + Spark jars), start an embedded broker and JupyterLab
#   make test   set everything up, then run the whole suite (unit tests + every notebook under papermill)
PYTHON ?= python3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python

.PHONY: lab test install jars bench clean-notebooks

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --prefix $(VENV) --name python3 --display-name "Python 3 (Kafka Failure Lab)"
	touch $@

install: $(VENV)/.installed

jars: install
	$(PY) -m lab fetch

lab: jars
	$(PY) -m lab start

test: jars
	$(PY) -m pytest $(PYTEST_ARGS)

bench: jars
	$(PY) benchmarks/run.py

clean-notebooks: install
	$(PY) -m lab clean-notebooks notebooks/*.ipynb
