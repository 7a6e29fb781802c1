# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install server-binaries bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The test suite starts its own throwaway MariaDB (and Redis) from these binaries.
server-binaries:
	@if ! command -v mariadbd >/dev/null 2>&1 && ! command -v mysqld >/dev/null 2>&1 \
	    && [ ! -x /usr/sbin/mariadbd ] && [ ! -x /usr/sbin/mysqld ] && [ -z "$$PROMPTGATE_TEST_MYSQL_URL" ]; then \
	  echo "installing mariadb-server (the tests start a throwaway server from it)"; \
	  $(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq mariadb-server >/dev/null; \
	fi

demo: $(STAMP)
	$(BIN)/promptgate demo

test: $(STAMP) server-binaries
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP) server-binaries
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info
