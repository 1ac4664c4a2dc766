# One entry point for humans and CI. Every target installs what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
WEB    := web
WEB_OUT := app/http/static
WEB_SRC := $(shell find $(WEB)/src $(WEB)/index.html $(WEB)/package.json $(WEB)/package-lock.json $(WEB)/vite.config.ts $(WEB)/tsconfig.json -type f 2>/dev/null)

# Offline-safe `langgraph dev`: no analytics, no version check.
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export LANGGRAPH_NO_VERSION_CHECK := 1

.PHONY: install dev run test lint bench browser promtool postgres web clean

# `make install`/`make run` take what the service needs; the test, lint and bench tools
# (playwright, langgraph-cli, mypy, ...) come with `make dev`, which the others depend on.
install: $(STAMP) web
	@# Start-up reads bytecode even where PYTHONDONTWRITEBYTECODE stops Python writing it.
	@$(BIN)/python -m compileall -q app graphs tools prompts

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	touch $@

dev: install $(DEV_STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

# The web UI is built at install time, never committed.
web: $(if $(wildcard $(WEB)/package.json),$(WEB_OUT)/index.html)

$(WEB_OUT)/index.html: $(WEB_SRC)
	cd $(WEB) && npm ci --no-audit --no-fund --loglevel=error && npm run build

# Debian's Chromium drives the browser tests (Playwright never downloads a browser here);
# a CJK font makes the screenshots readable.
browser:
	@{ command -v chromium && fc-list | grep -qi wenquanyi; } >/dev/null 2>&1 || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq chromium fonts-wqy-microhei >/dev/null; }

# Debian's prometheus package brings promtool: the tests check /metrics with it.
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

# PostgreSQL for the tests (tests/postgres.py): a server on 127.0.0.1:5432 is used as it is;
# else the tests start a throwaway cluster with Debian's binaries, installed here. Nothing
# is started here: a policy-rc.d made for the install (when there is none) keeps the
# package's post-install from starting its service.
postgres:
	@{ ls /usr/lib/postgresql/*/bin/initdb || $(PYTHON) -c \
	  'import socket; socket.create_connection(("127.0.0.1", 5432), 1).close()'; \
	} >/dev/null 2>&1 || { \
	  test -e /usr/sbin/policy-rc.d || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d \
	    && chmod +x /usr/sbin/policy-rc.d && trap 'rm -f /usr/sbin/policy-rc.d' EXIT; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }

run: install
	$(BIN)/react-agent serve

test: dev browser promtool postgres
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: dev
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(WEB_OUT) $(WEB)/node_modules .pytest_cache .mypy_cache .ruff_cache
