# Gatekeeper: `make demo` runs the main job, `make test` runs every test.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install test lint demo bench clean browser peers

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The review page's browser tests use Debian's Chromium (Playwright downloads nothing here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests..."; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| echo "WARNING: could not install chromium; browser tests will be skipped (say why in their output)"; }

# Real MCP software for the interop tests (npm filesystem server, mcp-server-git), cached in .cache/.
peers: $(STAMP)
	$(PY) scripts/install_peers.py

test: lint browser peers
	$(PY) -m pytest

demo: $(STAMP)
	@PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/demo.sh

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis dist build
