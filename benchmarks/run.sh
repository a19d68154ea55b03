#!/usr/bin/env bash
# One command for the export benchmark (issue 5): `bash benchmarks/run.sh [ARGS]` or `make bench`.
# Bootstraps .venv (scripts/bootstrap.sh), then runs `python -m benchmarks ARGS`, which starts
# private PostgreSQL + MariaDB servers unless TEST_PG_DSN / TEST_MYSQL_DSN (or --pg-url /
# --mysql-url) are given, installs the peers into .venv-bench, and writes docs/benchmarks.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
bash scripts/bootstrap.sh
export PATH=$ROOT/.venv/bin:$PATH:/usr/sbin
exec python -m benchmarks "$@"
