"""What every `rivet` command shares: the error boundary, the common options, config loading.

Kept apart from the `main` group (app.py) so that a command module imports this and never
the group that registers it: the registration runs one way (app.py → command modules →
this module), and `python -m rivet_core.cli` loads each module exactly once.

The error boundary (`guard`) is the CLI's only one: a failing command prints ONE redacted
`Error: …` line on stderr (with `--json-errors`: `{"error", "exit_class", "code"}`) and
exits with the code of the one table in rivet_core/errors.py.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from rivet_core.errors import ConfigError, RivetError, exit_code_for
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet")

config_option = click.option("-c", "--config", "config_path", required=True, type=click.Path(dir_okay=False),
                             help="Path to rivet.yaml.")
param_option = click.option("-p", "--param", "params", multiple=True, metavar="K=V",
                            help="Value for ${K} in the config (repeatable).")


def parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    """`-p KEY=VALUE` pairs as a dict (the text after the first `=` is the value)."""
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--param '{pair}' must look like KEY=VALUE")
        k, v = pair.split("=", 1)
        out[k.strip()] = v
    return out


def load(config_path: str, params: tuple[str, ...] = ()):  # noqa: ANN201
    """The config at `config_path` with `-p` values substituted (config imported lazily:
    `rivet --help` must not pay for pydantic)."""
    from rivet_core.config import load_config

    return load_config(config_path, parse_params(params))


def open_store(config_path: str):  # noqa: ANN201
    """The state store beside the config at `config_path`."""
    from rivet_core.state import StateStore

    return StateStore.open(load(config_path).config_path)


EXIT_PRECEDENCE = {3: 5, 4: 4, 2: 3, 1: 2, 0: 0}


def write_report(path: str, text: str) -> None:
    """`-o/--output FILE` of validate, reconcile and repair (Rivet's flag): the JSON document,
    written whole — a temp file beside it, then a rename — so a reader never sees half."""
    from pathlib import Path

    from rivet_core.errors import ConfigError

    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise ConfigError(f"cannot write report '{path}': {exc.strerror or exc} — choose a writable -o path") from exc


def worst_exit(codes: list[int]) -> int:
    """Most severe exit class across exports: 3 > 4 > 2 > 1 > 0 (docs/rivet-compat.md "CLI output and exit codes")."""
    return max(codes, key=lambda c: EXIT_PRECEDENCE.get(c, 1), default=0)


def _fail(exc: BaseException, json_errors: bool) -> None:
    code = exit_code_for(exc)  # the one exit-code table (errors.py)
    message = redact_secrets(exc.message if isinstance(exc, RivetError) else f"{type(exc).__name__}: {exc}")
    message = "".join(ch for ch in message if ch in "\n\t" or ch.isprintable())
    if json_errors:
        payload: dict[str, Any] = {"error": message, "exit_class": code}
        if isinstance(exc, RivetError) and exc.code:
            payload["code"] = exc.code
        click.echo(json.dumps(payload), err=True)
    else:
        click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def guard(fn: Callable[..., int | None]) -> Callable[..., None]:
    """Run a command body; turn errors into one redacted line and the right exit code."""

    def wrapper(*args: Any, **kwargs: Any) -> None:
        ctx = click.get_current_context()
        json_errors = bool(ctx.find_root().params.get("json_errors"))
        try:
            code = fn(*args, **kwargs) or 0
        except (click.exceptions.Exit, click.UsageError):  # a usage error: app.py's exit 2
            raise
        except KeyboardInterrupt:
            click.echo("Error: interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:  # `rivet … | head`: the reader left; not an error
            sys.stderr.close()
            sys.exit(0)
        except Exception as exc:  # error boundary: the CLI's one — an error becomes its message and exit code
            log.debug("command failed", exc_info=True)
            _fail(exc, json_errors)
        sys.exit(code)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper
