# Everyday commands. Each is one line of the shell you could type yourself; see README "Development".
# The venv comes from .ci/run (or: python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -e '.[test]').

PY ?= .venv/bin/python
RUFF ?= .venv/bin/ruff
# Tests that need no Postgres, start no process and reach no registry (markers: tests/support/markers.py;
# tests/process is all `process`, the rest is marked by what each test uses).
FAST = not postgres and not process and not network
BENCH_ARGS ?= --quick
# Two workers, whole modules each; PARALLEL= runs in one process.
PARALLEL ?= -n 2 --dist loadscope
# `make test` measures coverage as CI does ([tool.coverage] in pyproject.toml holds the floor); COV= skips it.
COV ?= --cov=lore_mcp --cov=stores --cov-report=term:skip-covered

.PHONY: test-fast test lint typecheck contracts lock bench

test-fast:  ## the fast lane: in-process tests on SQLite, real model and real MCP client (about 40 s on two workers)
	$(PY) -m pytest $(PARALLEL) -m "$(FAST)"

test:  ## the whole suite, both backends, real processes, conformance and uvx, with coverage (CI runs it so, on two workers)
	$(PY) -m pytest $(PARALLEL) $(COV)

lint:  ## ruff: lint and formatting, as CI checks them
	$(RUFF) check . && $(RUFF) format --check .

typecheck:  ## mypy on lore_mcp and stores (settings in pyproject.toml), as CI checks them
	$(PY) -m mypy

contracts:  ## the import contracts of pyproject.toml [tool.importlinter] (layers, stores/MCP seam, no circles), as CI checks them
	.venv/bin/lint-imports --no-cache

lock:  ## uv.lock still matches pyproject.toml, as CI checks it (after changing a dependency: .venv/bin/uv lock)
	.venv/bin/uv lock --check

bench:  ## a smoke run of the benchmarks; BENCH_ARGS= for the full 1k/10k/100k run (30-60 minutes)
	$(PY) benchmarks/run.py $(BENCH_ARGS)
