# portscope: `make view` installs and opens the viewer on the sample traces; `make test` installs and runs every test.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0

.PHONY: view test test-torch install install-dev system-deps lint bench samples screenshots clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade 'pip>=25.3'

install: $(BIN)/python
	$(BIN)/pip install -q -c requirements-lock.txt -e .

view: install
	$(BIN)/portscope view

# Debian packages the browser tests and the scale-out test need (installed when running as root).
system-deps:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v redis-server >/dev/null \
		|| { ! command -v node >/dev/null && [ "$$(id -u)" = 0 ]; }; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver redis-server nodejs >/dev/null; \
		else echo "install chromium, chromium-driver and redis-server (sudo apt-get install ...)"; exit 1; fi; \
	fi  # nodejs: the tests of the viewer's URL-writing script run it (they skip without it)

install-dev: $(BIN)/python system-deps
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -c requirements-lock.txt -e '.[dev,profile]'
	$(BIN)/python -m portscope.profiler.native  # builds explain()'s native hot path once (~30 s; cached)

test: install-dev
	DASH_TEST_CHROMEPATH=/usr/bin/chromium $(BIN)/python -m pytest -q --headless

# The profiler's tests on another torch, in its own venv (x86_64 wheels from PyPI are CUDA builds of
# several GB). transformers 5 needs torch >= 2.6: older torch gets the last 4.x.
TORCH_VERSION ?= 2.5.1
TRANSFORMERS ?= transformers>=4.45,<5
test-torch:
	$(PY) -m venv .venv-torch-$(TORCH_VERSION)
	.venv-torch-$(TORCH_VERSION)/bin/pip install -q --upgrade 'pip>=25.3'
	.venv-torch-$(TORCH_VERSION)/bin/pip install -q torch==$(TORCH_VERSION)
	.venv-torch-$(TORCH_VERSION)/bin/pip install -q -e '.[dev,profile]' '$(TRANSFORMERS)'
	.venv-torch-$(TORCH_VERSION)/bin/python -m pytest -q -p no:logging tests/profiler

lint: install-dev
	$(BIN)/ruff check .

bench: install-dev
	$(BIN)/python bench/overhead_bench.py

samples: install-dev
	$(BIN)/portscope demo -o sample_traces

clean:
	rm -rf $(VENV) build dist *.egg-info
