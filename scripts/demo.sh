#!/usr/bin/env bash
# The README's first command (`make demo`): set up the environment, build the SQLite demo
# database, materialize every demo asset through Dagster (with its checks), and print
# where the files, manifests, run reports and check verdicts are.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export DAGSTER_HOME=${DAGSTER_HOME:-$PWD/dagster_home}
exec .venv/bin/python -m rivet_dagster.demo
