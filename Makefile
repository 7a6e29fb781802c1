# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install server-binaries mermaid promptfoo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# The test suite starts its own throwaway servers (MariaDB; PostgreSQL as a warehouse
# source; Redis for the shared rate limit) from these Debian packages, and drives the
# status page in headless Chromium (with a font for its screenshots); install whichever
# is missing.
server-binaries:
	@missing=""; \
	if ! command -v mariadbd >/dev/null 2>&1 && ! command -v mysqld >/dev/null 2>&1 \
	    && [ ! -x /usr/sbin/mariadbd ] && [ ! -x /usr/sbin/mysqld ] && [ -z "$$PROMPTGATE_TEST_MYSQL_URL" ]; then \
	  missing="$$missing mariadb-server"; fi; \
	if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  missing="$$missing postgresql"; fi; \
	if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then \
	  missing="$$missing redis-server"; fi; \
	if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then \
	  missing="$$missing chromium fonts-dejavu-core"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (the tests start throwaway servers and a headless browser from them)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The PR comment's chart is drawn by a real Mermaid 11 in headless Chromium
# (tests/integration/test_chart_render.py), and the comment itself by marked, GitHub-like
# Markdown: both from the npm registry into .cache/mermaid, once.
MERMAID_DIR := .cache/mermaid
MERMAID_JS := $(MERMAID_DIR)/node_modules/mermaid/dist/mermaid.min.js
MARKED_JS := $(MERMAID_DIR)/node_modules/marked/lib/marked.umd.js

$(MERMAID_JS) $(MARKED_JS):
	mkdir -p $(MERMAID_DIR)
	npm install --prefix $(MERMAID_DIR) --no-audit --no-fund --silent mermaid@11 marked@15

mermaid: $(MERMAID_JS) $(MARKED_JS)

# promptfoo 0.121 from the npm registry into .cache/promptfoo, once: the import's agreement test
# (tests/integration/test_import_promptfoo.py) runs promptfoo's own eval beside the gate's, and
# P2 (bench/user_submit_wait.py --promptfoo) measures it against the gate.
PROMPTFOO_DIR := .cache/promptfoo
PROMPTFOO_BIN := $(PROMPTFOO_DIR)/node_modules/.bin/promptfoo

$(PROMPTFOO_BIN):
	mkdir -p $(PROMPTFOO_DIR)
	npm install --prefix $(PROMPTFOO_DIR) --no-audit --no-fund --silent promptfoo@0.121

promptfoo: $(PROMPTFOO_BIN)

demo: $(STAMP)
	$(BIN)/promptgate demo

# three test processes (pytest-xdist), each with its own MariaDB, Redis and PostgreSQL.
# --dist worksteal: xdist's default hands a process a batch of tests it keeps to the end; a
# timeline of one run showed one process alone for its last 140 s with its batch while the
# other two had stopped (9:11); with work stealing the three ended within a second (8:41).
TEST_WORKERS ?= 3

# compileall: the tests start hundreds of interpreters (CLI commands, workers, services, model
# servers) that import this tree; where PYTHONDONTWRITEBYTECODE is set (as on these machines)
# none writes its bytecode, and each compiled the modules it imports again (a CLI command
# 0.75 s of CPU instead of 0.50).
test: $(STAMP) server-binaries mermaid promptfoo
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m compileall -q gate workers
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

bench: $(STAMP) server-binaries promptfoo
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info
