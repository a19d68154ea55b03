"""`rivet cdc`: one bounded drain of a source's change log into a local directory, with
Rivet's flags (docs/modes.md `cdc`).

The command is a `mode: cdc` export written as a config for you: it builds the config
(`source.url_env` pointing at the URL, so no secret is written to disk), keeps it and the
state store in `<output>.rivet-cdc/` beside the output directory (the output stays one
export's prefix: parts, manifests, `_SUCCESS`), and runs it through the same run as
`rivet run` (rivet_core/pipeline/cdc/). Run it again to publish what changed since.

Rivet's flags that describe another model are refused with the way to get the result:
NDJSON on stdout (no `--output`), `--stream`, `--max-events`, `--capture-instance`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click
import yaml

from rivet_core.cli.shared import guard
from rivet_core.errors import ConfigError

#: The environment variable the generated config reads the source URL from.
URL_ENV = "RIVET_CDC_SOURCE_URL"


def _source_url(source: str | None, source_env: str | None, source_file: str | None) -> str:
    given = [f for f, v in (("--source", source), ("--source-env", source_env), ("--source-file", source_file)) if v]
    if len(given) != 1:
        raise ConfigError("rivet cdc: pass exactly one of --source URL, --source-env VAR or --source-file PATH "
                          f"(got {', '.join(given) or 'none'}) — --source-env keeps the URL out of `ps`")
    if source_env:
        value = os.environ.get(source_env)
        if not value:
            raise ConfigError(f"rivet cdc: --source-env {source_env}: the variable is not set — export it")
        return value
    if source_file:
        try:
            return Path(source_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"rivet cdc: --source-file {source_file}: {exc.strerror or exc}") from None
    assert source is not None
    return source


def _refuse_other_models(output: str | None, stream: bool, max_events: int | None,
                         capture_instance: str | None) -> None:
    if output is None:
        raise ConfigError("rivet cdc: NDJSON on stdout is not supported — pass --output DIR to publish typed "
                          "parts with a manifest and _SUCCESS")
    if stream:
        raise ConfigError("rivet cdc: --stream (run forever) is not supported — each run drains to the log's "
                          "end as of its start; run the command on a schedule")
    if max_events is not None:
        raise ConfigError("rivet cdc: --max-events is not supported — a run publishes its whole window so the "
                          "next run can resume exactly after it; lower --rollover to bound memory instead")
    if capture_instance is not None:
        raise ConfigError("rivet cdc: --capture-instance is for SQL Server, which this rivet does not read")


def _source_type(url: str) -> str:
    scheme = url.split(":", 1)[0].lower()
    if scheme.startswith("postgres"):
        return "postgres"
    if scheme.startswith(("mysql", "mariadb")):
        return "mysql"
    raise ConfigError(f"rivet cdc: --source scheme '{scheme}' has no change log here — use postgresql:// "
                      "(or mysql://)")


def _export_name(tables: tuple[str, ...]) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tables[0]) if len(tables) == 1 else "cdc"


def build_config(url: str, tables: tuple[str, ...], output: Path, fmt: str, checkpoint: str | None,
                 rollover: int, slot: str | None, server_id: int | None) -> dict:
    """The `rivet.yaml` of this drain (module docstring)."""
    cdc: dict = {"rollover": rollover}
    for key, value in (("checkpoint", os.path.abspath(checkpoint) if checkpoint else None), ("slot", slot),
                       ("server_id", server_id)):
        if value is not None:
            cdc[key] = value
    export: dict = {"name": _export_name(tables), "mode": "cdc", "format": fmt, "cdc": cdc,
                    "destination": {"type": "local", "path": str(output)}}
    if len(tables) == 1:
        export["table"] = tables[0]
    else:
        export["tables"] = list(tables)
    return {"source": {"type": _source_type(url), "url_env": URL_ENV}, "exports": [export]}


@click.command("cdc")
@click.option("--source", help="Source URL (prefer --source-env or --source-file: a URL here shows in `ps`).")
@click.option("--source-env", help="Environment variable holding the source URL.")
@click.option("--source-file", type=click.Path(dir_okay=False), help="File holding the source URL.")
@click.option("--table", "tables", multiple=True, required=True,
              help="Table to capture (repeatable: several tables through one slot, each to <output>/<table>/).")
@click.option("--output", type=click.Path(file_okay=False), help="Local directory to publish into.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@click.option("--checkpoint", type=click.Path(dir_okay=False),
              help="Also write the last published position to this file after each run.")
@click.option("--rollover", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Changes per part; a part is cut only between transactions.")
@click.option("--slot", help="PostgreSQL logical replication slot (default rivet_slot; created if absent).")
@click.option("--server-id", "server_id", type=click.IntRange(min=1), help="MySQL/MariaDB replica id (default 4271).")
@click.option("--max-events", "max_events", type=int, help="Rivet's flag; refused here (see the message).")
@click.option("--stream", is_flag=True, help="Rivet's flag; refused here (see the message).")
@click.option("--capture-instance", "capture_instance", help="SQL Server only; refused here.")
@guard
def cdc(source: str | None, source_env: str | None, source_file: str | None, tables: tuple[str, ...],
        output: str | None, fmt: str, checkpoint: str | None, rollover: int, slot: str | None,
        server_id: int | None, max_events: int | None, stream: bool, capture_instance: str | None) -> int:
    """Publish the changes committed since the last run (one bounded drain)."""
    _refuse_other_models(output, stream, max_events, capture_instance)
    assert output is not None
    url = _source_url(source, source_env, source_file)
    out = Path(os.path.abspath(output))
    home = out.parent / f"{out.name}.rivet-cdc"
    home.mkdir(parents=True, exist_ok=True)
    config_path = home / "rivet.yaml"
    config_path.write_text(yaml.safe_dump(build_config(url, tables, out, fmt, checkpoint, rollover, slot, server_id),
                                          sort_keys=False), encoding="utf-8")
    os.environ[URL_ENV] = url
    # `rivet run` on the generated config, found through the group (a command module imports
    # only shared.py, app.py); click fills its defaults, and it exits with the run's code.
    ctx = click.get_current_context()
    group = ctx.find_root().command
    assert isinstance(group, click.Group)
    run = group.get_command(ctx, "run")
    assert run is not None
    ctx.invoke(run, config_path=str(config_path))
    return 0
