# Rivet on Dagster: developer entry points. Every target bootstraps .venv first (fast when
# nothing changed), so a fresh clone needs only python3 >= 3.11 and `make`.
#   make test                 start PostgreSQL, MariaDB, SeaweedFS on free ports and run pytest
#   make test ARGS='-k slack' pass arguments through to pytest
#   make demo                 the end-to-end demo (scripts/demo.sh)
#   make dev                  the Dagster UI on the demo (or RIVET_CONFIG) at http://127.0.0.1:3000
#   make lint                 ruff (not part of `make test` yet)
#   make bench ARGS='--scale 0.1'  the export benchmark (benchmarks/) → docs/benchmarks.md
#   make lock                 re-pin requirements.lock from pyproject.toml (then commit both)
#   make clean                remove caches and build output (keeps .venv: `rm -rf .venv` for that)
SHELL := /usr/bin/env bash
VENV  := .venv
ARGS  ?=

.PHONY: test demo dev lint lock bootstrap clean bench

test:
	bash scripts/test.sh $(ARGS)

demo:
	bash scripts/demo.sh $(ARGS)

bench:
	bash benchmarks/run.sh $(ARGS)

# The instance is created/migrated once, by one process, before `dagster dev` starts the
# webserver, the daemon and the code server, which would otherwise race to create a fresh
# SQLite instance (alembic "more than one head"; docs/dagster-guide.md).
dev: bootstrap
	export DAGSTER_HOME=$${DAGSTER_HOME:-$$PWD/dagster_home}; \
	$(VENV)/bin/dagster instance migrate >/dev/null && \
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p $${PORT:-3000}

bootstrap:
	bash scripts/bootstrap.sh

lint: bootstrap
	$(VENV)/bin/ruff check rivet_core rivet_dagster tests benchmarks
	$(VENV)/bin/lint-imports

# The lock is for Python 3.11 (the CI machines' version); --custom-compile-command makes the
# file's header say how to regenerate it.
lock:
	@[ -x $(VENV)/bin/uv ] || bash scripts/bootstrap.sh
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --python-version 3.11 \
	  --custom-compile-command "make lock" -q -o requirements.lock

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis build dist
	find . -path ./.venv -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf
