#!/usr/bin/env bash
# The README's first command (`make demo`): set up the environment, create the SQLite demo
# database, run every demo export, verify the destination, and say where everything is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
PY=.venv/bin/python
RIVET=.venv/bin/rivet
$PY -m rivet_core.demo >/dev/null
echo "== rivet run -c demo/rivet.yaml --validate"
set +e
$RIVET run -c demo/rivet.yaml --validate
rc=$?
set -e
echo
echo "== rivet validate -c demo/rivet.yaml"
$RIVET validate -c demo/rivet.yaml || true
echo
echo "Files:     $(pwd)/demo/output/<export>/   (parts, manifest.json, _SUCCESS)"
echo "Reports:   $(pwd)/demo/.rivet/runs/<run_id>/summary.md"
echo "State:     $(pwd)/demo/.rivet_state.db    (try: .venv/bin/rivet metrics -c demo/rivet.yaml)"
exit $rc
