"""`rivet doctor -c rivet.yaml [--json]`: the pre-flight checks of rivet_core/ops/doctor.py.

Prints one `[OK] …` or `[FAIL] … — fix: …` line per check and a closing verdict on stdout
(`--json`: one document `{ok, exit_code, checks: [{name, ok, detail, fix, transient}]}`).

Exit codes (the conventions of cli/__init__.py / docs/operations.md "Exit codes"): 0 every check passed; 2 every
failed check is transient (cannot connect, timed out — worth retrying later); 1 otherwise
(wrong password, read-only directory, broken config, …). No credentials are ever printed:
every line passes through `redact_secrets`.

Not behind the shared error boundary (cli/shared.py `guard`): a doctor failure is itself a
check line, so even an internal error prints in the same shape.
"""

from __future__ import annotations

import json
import sys

import click

from rivet_core.redact import redact_secrets


@click.command("doctor")
@click.option("-c", "--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="Path to rivet.yaml.")
@click.option("-p", "--param", "params", multiple=True, metavar="K=V",
              help="Value for ${K} in the config (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
def doctor(config_path: str, params: tuple[str, ...], as_json: bool) -> None:
    """Check the config, source login, destination write access and state store."""
    from rivet_core.ops.doctor import Check, DoctorReport, run_doctor

    pairs: dict[str, str] = {}
    bad = [p for p in params if "=" not in p]
    if bad:
        report = DoctorReport([Check("config", False, f"--param '{bad[0]}' is not KEY=VALUE",
                                     "pass parameters as -p NAME=value")])
    else:
        for pair in params:
            key, value = pair.split("=", 1)
            pairs[key.strip()] = value
        try:
            report = run_doctor(config_path, pairs)
        except Exception as exc:  # error boundary: a doctor bug must still print one clean line
            report = DoctorReport([Check("doctor", False, f"internal error: {type(exc).__name__}: {exc}",
                                         "re-run with `rivet -vv doctor` and report the traceback")])
    if as_json:
        click.echo(redact_secrets(json.dumps(report.to_dict(), indent=2)))
    else:
        for line in report.lines():
            click.echo(redact_secrets(line))
    sys.exit(report.exit_code)
