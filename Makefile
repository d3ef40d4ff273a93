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

# Tools some tests need, from Debian's packages when root with apt-get (CI, containers); without them those
# tests are skipped and say why: docker-compose only validates docker-compose.yml (no Docker engine needed);
# chromium is the real browser tests/test_browser.py drives with Playwright (no browser download).
APT_TOOLS = docker-compose chromium   # each package installs the command of the same name

tools:
	@missing=""; for t in $(APT_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq; then \
	  for pkg in $$missing; do DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg >/dev/null 2>&1 || true; done; \
	fi; \
	command -v docker-compose >/dev/null || echo "docker-compose is not installed: the compose-file test will be skipped"; \
	command -v chromium >/dev/null || echo "chromium is not installed: the browser test (tests/test_browser.py) will be skipped"

test: jars tools
	$(PY) -m pytest $(PYTEST_ARGS)

bench: jars
	$(PY) benchmarks/run.py

clean-notebooks: install
	$(PY) -m lab clean-notebooks notebooks/*.ipynb
