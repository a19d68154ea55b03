"""The `main` click group of `rivet`: global options (--version, --json-errors, -v), logging
set up once per process, and the registration of every command group's module.

Each command lives in the module named after its group (run.py, validate.py, reconcile.py,
state.py, history.py, init.py, check.py, plan.py, doctor.py, gc.py, schema.py, completions.py, cdc.py) and imports only
shared.py from this package, so the registration below is the one direction the imports run.

The group is lazy (`_LazyGroup`): it knows each command by name and imports the command's
module only when that command is invoked or listed, so `rivet run` does not pay for the
modules of the other fourteen commands (docs/benchmarks.md "Start-up"); `rivet --help` still
lists every command with its help line.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from rivet_core import __version__
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet")


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_secrets(super().format(record))


def _setup_logging(verbose: int) -> None:
    level = os.environ.get("RIVET_LOG", "").upper() or ("DEBUG" if verbose > 1 else "INFO" if verbose else "WARNING")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level, logging.WARNING))


#: Every command: its name → (module under rivet_core.cli, attribute).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run"), "validate": ("validate", "validate"), "reconcile": ("reconcile", "reconcile"),
    "repair": ("reconcile", "repair"), "state": ("state", "state"), "metrics": ("history", "metrics"),
    "journal": ("history", "journal"), "init": ("init", "init"), "check": ("check", "check"),
    "plan": ("plan", "plan"), "apply": ("plan", "apply"), "doctor": ("doctor", "doctor"), "gc": ("gc", "gc"),
    "schema": ("schema", "schema"), "completions": ("completions", "completions"),
    "cdc": ("cdc", "cdc"),
}


#: The exit code of a bad command line (Rivet's: clap's 2).
USAGE_EXIT = 2


def _usage_error(exc: click.UsageError, ctx: click.Context | None) -> click.UsageError:
    """A bad command line exits 2, as Rivet's does (its exit-code table: 2 is "retryable" and
    argument errors; docs/operations.md "Exit codes"), so a Rivet user's wrapper scripts keep
    their meaning (issue 35; docs/rivet-compat.md "Rivet's CLI matrix"). With `--json-errors`
    it is one JSON line like every other error (`shared._fail`), `"code": "RIVET_USAGE"`
    telling it apart from a transient failure."""
    if isinstance(exc, click.MissingParameter) and exc.param is not None:  # clap's words, for Rivet's greps
        missing = exc.param.get_error_hint(ctx) if ctx is not None else exc.param.human_readable_name
        exc = click.UsageError(f"{exc.format_message()} (the following required arguments were not provided: "
                               f"{missing})", ctx=exc.ctx)
    exc.exit_code = USAGE_EXIT
    root = ctx.find_root() if ctx is not None else None
    if root is not None and root.params.get("json_errors"):
        import json

        click.echo(json.dumps({"error": redact_secrets(exc.format_message()), "exit_class": USAGE_EXIT,
                               "code": "RIVET_USAGE"}), err=True)
        sys.exit(USAGE_EXIT)
    return exc


class _LazyGroup(click.Group):
    """A group that imports a command's module on first use (see the module docstring), and
    whose usage errors exit 1 (`_usage_error`)."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: object) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)  # type: ignore[arg-type]
        except click.UsageError as exc:
            raise _usage_error(exc, exc.ctx) from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _usage_error(exc, exc.ctx or ctx) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, attr = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(f"rivet_core.cli.{module}"), attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rivet")
@click.option("--json-errors", is_flag=True, help="Print errors as JSON on stderr.")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(json_errors: bool, verbose: int) -> None:
    """Rivet: verifiable database exports to Parquet/CSV on local disk, S3, GCS or Azure."""
    from rivet_core.pipeline.resources.malloc_arenas import limit_malloc_arenas

    limit_malloc_arenas()  # before any reader/worker thread exists (see the module)
    _setup_logging(verbose)
