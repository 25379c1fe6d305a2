# aios-rl — the two commands: `make demo` and `make test` (both set everything up first).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS := llm,ray,browser,dev
PIP_FLAGS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
PYTEST_ARGS ?=
# Test workers (pytest-xdist), one test file each at a time so module fixtures are built once. The suite
# mostly waits on sandboxed subprocesses, so two workers use the 2 cores that one leaves half idle.
TEST_WORKERS ?= 2

# Benchmarks that finish in minutes; the long ones (an hour or more on 2 cores) run with `make bench-long`.
BENCHMARKS := benchmarks/control_plane.py benchmarks/shell_env.py benchmarks/shell_generate.py benchmarks/crash_resume.py
LONG_BENCHMARKS := benchmarks/campaign.py benchmarks/rollouts.py benchmarks/shell_learning.py

.PHONY: setup system-deps demo test bench bench-long bench-learning clean

setup: system-deps $(STAMP)

system-deps:
	@PYTHON='$(PYTHON)' bash scripts/system-deps.sh

$(STAMP): pyproject.toml
	@test -n '$(PYTHON)' || { echo "aios-rl needs Python 3.11 or newer and found no python3 on PATH; install python3.11 or set PYTHON=/path/to/python3.11" >&2; exit 1; }
	@'$(PYTHON)' -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "aios-rl needs Python 3.11 or newer; set PYTHON=/path/to/python3.11")'
	@# A venv whose creation failed (no ensurepip) has a python but no pip: make it again.
	@$(PY) -m pip --version >/dev/null 2>&1 || '$(PYTHON)' -m venv --clear $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(PIP_FLAGS) -e '.[$(EXTRAS)]'
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/aios-rl demo shell --out runs/demo-$(shell date +%Y%m%d-%H%M%S)

test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

bench: setup
	@for script in $(BENCHMARKS); do echo "== $$script"; $(PY) $$script || exit 1; done

bench-long: setup
	@for script in $(LONG_BENCHMARKS); do echo "== $$script"; $(PY) $$script || exit 1; done

bench-learning: setup
	$(PY) benchmarks/shell_learning.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
