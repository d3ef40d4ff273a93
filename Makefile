# The two commands that matter:
#   make lab    set everything up (venv, packages, Kafka + Spark jars), start an embedded broker and JupyterLab
#   make test   set everything up, then run the whole suite (unit tests + every notebook under papermill)
PYTHON ?= python3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python

.PHONY: lab test install jars tools bench clean-notebooks

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

# docker-compose only validates docker-compose.yml in the tests (no Docker engine needed)
tools:
	@command -v docker-compose >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && apt-get install -y -qq docker-compose >/dev/null; } || \
	  echo "docker-compose is not installed: the compose-file test will be skipped"

test: jars tools
	$(PY) -m pytest $(PYTEST_ARGS)

bench: jars
	$(PY) benchmarks/run.py

clean-notebooks: install
	$(PY) -m lab clean-notebooks notebooks/*.ipynb
