# Gatekeeper: `make demo` runs the main job, `make test` runs every test.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install test lint demo demo-check bench crash clean browser peers postgres

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/cog --check README.md

# The review page's browser tests use Debian's Chromium (Playwright downloads nothing here).
# Under CI=true a failed install fails the run: skipped browser tests must not pass as green.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests..."; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| if [ "$$CI" = "true" ]; then \
			echo "ERROR: could not install chromium (apt-get install chromium failed); CI=true needs the browser tests" >&2; \
			exit 1; \
		else \
			echo "WARNING: could not install chromium; browser tests will be skipped (say why in their output)"; \
		fi; }

# Real MCP software for the interop tests (npm filesystem server, mcp-server-git), cached in .cache/.
peers: $(STAMP)
	$(PY) scripts/install_peers.py

# PostgreSQL for the store suite's second backend (Debian's package; the tests start their own
# throwaway clusters on a Unix socket). Under CI=true a failed install fails the run.
postgres:
	$(PYTHON) scripts/postgres.py

# Two workers by default (TEST_WORKERS=1 runs one process; =auto, one per CPU). worksteal: a worker
# that runs dry takes over the other's queue, so the few long tests do not end the run alone.
TEST_WORKERS ?= 2

test: lint browser peers postgres
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The guided tour: you approve in your browser. demo-check: the same tour, Chromium approves.
demo: $(STAMP)
	$(PY) -m gatekeeper.demo.tour

demo-check: $(STAMP) browser
	$(PY) -m gatekeeper.demo.tour --headless

bench: $(STAMP) postgres
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis dist build

# The big crash campaign: 2,000+ kills of the committer, and how often each planted bug is caught.
crash: $(STAMP)
	GATEKEEPER_CRASH_KILLS=2000 GATEKEEPER_CRASH_PLANTED_CAMPAIGNS=20 $(PY) -m pytest -q -s -p no:cacheprovider -o timeout=5400 tests/test_commit_crash.py
