# The two commands that matter:
#   make lab    set everything up (venv, packages, Kafka + Spark jars), then start JupyterLab
#   make test   for developers and CI: set everything up, then the whole suite (unit tests + every notebook)
# What attendees also run:
#   make check                       the pre-flight (offline): Python, Java, memory, disk, jars, ports, a broker
#   make reinstall                   the lab's packages again at their pinned versions (a fix the pre-flight names)
#   make prune [KEEP=N]              delete old run folders
#   make fetch-all                   the jars of every lesson now, so that no lesson needs the network later
#   make doctor BOOTSTRAP=host:port  read-only diagnosis of your cluster (docs/doctor.md)
#   make lab KAFKA_LAB_IP=0.0.0.0   JupyterLab on another interface (a container, a cloud workspace), token kept
#   make lab PLAYGROUND=1           also a broker to poke around (KAFKA_LAB_PLAYGROUND in JupyterLab)
#   make lab KAFKA_LAB_IDLE_MINUTES=0   keep idle kernels (default: shut down after 30 idle minutes)
#   make room [IP=ADDRESS] [ROOM_PORT=8765] [NEW=1]   a teacher's room: the room's votes and runs, live (docs/teaching.md)
#   make lab ROOM=URL                this lab in that room: its predictions and runs go to the teacher's page
#   make lab KIT=DIR                 install from an offline kit, with no network at all (make kit, below)
#   make kit KIT_DIR=DIR [KIT_PLATFORMS=all]   write that kit (a teacher, once, with the network)
#   make site [SITE_DIR=site] [NOTEBOOKS="00 04"]   every notebook executed at its defaults, as a static site
ifeq ($(OS),Windows_NT)
$(error The lab runs on Linux, macOS, or Windows through WSL2 (or the dev container in .devcontainer/): open a WSL2 terminal and run make there)
endif
# In the conda environment of environment.yml, activated, that environment is the lab's: no .venv is built beside it.
ifeq ($(CONDA_DEFAULT_ENV),kafka-failure-lab)
VENV   ?= $(CONDA_PREFIX)
PYTHON ?= $(CONDA_PREFIX)/bin/python
endif
# The newest Python from 3.11 to 3.13 that runs here, or PYTHON=...
ifndef PYTHON
PYTHON := $(firstword $(foreach p,python3.13 python3.12 python3.11 python3,$(shell $(p) -c 'import sys; assert (3, 11) <= sys.version_info[:2] <= (3, 13)' >/dev/null 2>&1 && echo $(p))))
endif
VENV   ?= .venv
PY      = $(VENV)/bin/python
# KIT=DIR: every package from the kit's wheels, never from the network (lab/commands/kit.py)
PIP_FROM = $(if $(KIT),--no-index --find-links $(abspath $(KIT))/wheels)

.PHONY: room lab test install reinstall jars fetch-all check prune tools doctor bench kit site clean-notebooks

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "No Python 3.11 to 3.13 found: install one (python.org, Homebrew, apt, pyenv) or give PYTHON=..."; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 11) <= v <= (3, 13) else f"$(PYTHON) is Python {v[0]}.{v[1]}: the lab needs 3.11 to 3.13 (give PYTHON=...)")'
	$(if $(KIT),$(PYTHON) lab/commands/kit.py verify $(KIT))
	$(if $(wildcard $(VENV)/bin/python),,$(PYTHON) -m venv $(VENV))
	$(PY) -m pip install --quiet $(PIP_FROM) --upgrade pip
	@echo "Installing the lab's Python packages into $(VENV): about 713 MB the first time (pyspark's wheel is 430 MB of it), pip shows each download with its size and, in a terminal, its progress"
	$(PY) -m pip install $(PIP_FROM) -e '.[course,dev]'
	$(PY) -m ipykernel install --prefix $(VENV) --name python3 --display-name "Python 3 (Kafka Failure Lab)"
	touch $@

install: $(VENV)/.installed

# The lab's packages installed again at their pinned versions (its Java among them), over whatever changed them
reinstall:
	rm -f $(VENV)/.installed
	$(MAKE) install

jars: install
	$(PY) -m lab fetch $(if $(KIT),--kit $(KIT))

fetch-all: install
	$(PY) -m lab fetch --all $(if $(KIT),--kit $(KIT))

check: install
	$(PY) -m lab check

# Deletes old run folders (logs, stores) under the lab's work folder, never one in use: make prune [KEEP=N]
prune: install
	$(PY) -m lab prune $(if $(KEEP),--keep $(KEEP))

lab: jars
	$(PY) -m lab start $(if $(KAFKA_LAB_IP),--ip $(KAFKA_LAB_IP)) $(if $(PLAYGROUND),--playground) $(if $(KAFKA_LAB_IDLE_MINUTES),--idle-minutes $(KAFKA_LAB_IDLE_MINUTES)) $(if $(ROOM),--room $(ROOM))

# The teacher's room (lab/room): learners' predictions and runs, live on the teacher's page; it needs no jars
room: install
	$(PY) -m lab room $(if $(IP),--ip $(IP)) $(if $(ROOM_PORT),--port $(ROOM_PORT)) $(if $(NEW),--new)

# Tools some tests need, from Debian's packages when root with apt-get (CI, containers); without them those
# tests are skipped and say why: docker-compose only validates docker-compose.yml (no Docker engine needed);
# chromium is the real browser tests/test_browser.py drives with Playwright (no browser download); prometheus
# brings promtool, which checks and unit-tests the doctor's alert rules and its dashboard's queries.
APT_TOOLS = docker-compose chromium prometheus   # each package installs the command of the same name

tools:
	@missing=""; for t in $(APT_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq; then \
	  for pkg in $$missing; do DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg >/dev/null 2>&1 || true; done; \
	fi; \
	command -v docker-compose >/dev/null || echo "docker-compose is not installed: the compose-file test will be skipped"; \
	command -v chromium >/dev/null || echo "chromium is not installed: the browser test (tests/test_browser.py) will be skipped"; \
	command -v promtool >/dev/null || echo "promtool is not installed: the alert rules' tests (tests/test_doctor_monitoring.py) will be skipped"

# Three workers by default: two run the notebooks (they mostly wait on Kafka's clocks), the third the other test
# modules beside them (tests/conftest.py); JOBS=2 takes turns, JOBS=1 runs one test at a time.
JOBS ?= 3
test: jars tools
	$(PY) -m pytest -n $(JOBS) $(PYTEST_ARGS)

# The offline kit: wheels for this machine and Python (KIT_PLATFORMS=all: Linux and macOS, x86_64 and arm64, Python
# 3.11 to 3.13), every jar of lab/jars.lock, the site of `make site` when it was built (SITE_DIR), checksums. uv resolves each platform's packages for that platform.
KIT_PLATFORMS ?= current
kit: jars
	@test -n "$(KIT_DIR)" || { echo "give the kit's folder: make kit KIT_DIR=/media/usb/kafka-lab-kit"; exit 1; }
	$(PY) -m pip install --quiet 'uv==0.13.9'
	$(PY) -m lab kit $(KIT_DIR) --platform $(KIT_PLATFORMS) --site $(SITE_DIR)

# The course as a static site (lab/commands/site.py): each notebook run at its defaults (two at a time where the machine has room), rendered to
# HTML with nbconvert; open $(SITE_DIR)/index.html. The whole course takes about 20 minutes, two notebooks at a time.
SITE_DIR ?= site
site: jars
	$(PY) -m lab site $(SITE_DIR) $(if $(NOTEBOOKS),--notebooks $(NOTEBOOKS))

# The doctor on your cluster, read-only (docs/doctor.md): make doctor BOOTSTRAP=broker1:9092 [DOCTOR_ARGS="--fail-on high"]
doctor: jars
	@test -n "$(BOOTSTRAP)" || { echo "give the cluster to read: make doctor BOOTSTRAP=host:port"; exit 4; }
	$(PY) -m lab doctor --bootstrap $(BOOTSTRAP) $(DOCTOR_ARGS)

bench: jars
	$(PY) benchmarks/run.py

clean-notebooks: install
	$(PY) -m lab clean-notebooks notebooks/*.ipynb
