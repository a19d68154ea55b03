"""The `rivet` command line: run, validate, reconcile, state, metrics, journal, init, check,
plan/apply, doctor, gc.

Exit codes (docs/operations.md "Exit codes"): 0 success, 1 config/generic, 2 transient, 3 data integrity
(quality gate, validation failure, unsafe retry), 4 schema drift with `fail`. A failing
command prints ONE clear line on stderr (`Error: …`), redacted; with `--json-errors` it
prints `{"error": …, "exit_class": n, "code": …}` instead (shared.py holds that boundary).
Logs go to stderr, data and `--json` documents to stdout, so `rivet run … --json | jq`
works — never both at once: `run --json` is refused when an export streams to a stdout
destination.

Layout: app.py is the `main` group and registers one module per command group; every
command module imports shared.py (options, config loading, the error boundary) and never
app.py, so the imports run one way. Importing this package stays light (no pyarrow, no
pydantic): each command imports the engine when it runs.
"""

from rivet_core.cli.app import main

__all__ = ["main"]
