"""`rivet init`: a commented `rivet.yaml` scaffolded from a live database.

Introspection (rivet_core.introspect) describes each selected table; the heuristics pick a
mode per table; this module renders the YAML by hand because the comments are the point:
each export says *why* it got its mode, and every line a human must confirm is marked
`# REVIEW`. The source block names the environment variable that holds the URL
(`url_env`) — the URL itself, and so the password, is never written.

The rendered file is validated with the normal loader before it is written, so a scaffold
that would not load is an error here, not at the user's first run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from rivet_core.catalog import list_tables
from rivet_core.config.blocks import config_blocks
from rivet_core.config.tuning import resolve_tuning
from rivet_core.errors import ConfigError
from rivet_core.introspect.heuristics import SMALL_TABLE_ROWS, Suggestion, suggest
from rivet_core.introspect.select import select_tables
from rivet_core.introspect.session import split_table
from rivet_core.introspect.table_report import TableReport, describe_table
from rivet_core.redact import redact_url
from rivet_core.source import engine_of, open_source
from rivet_core.source.dialect import SourceDialect

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class InitOptions:
    """`rivet init`'s flags. The URL comes from exactly one of `source_env` (written as
    `url_env`), `source_url` (`--source`: used to connect, never written — the scaffold names
    `url_env: DATABASE_URL`, as Rivet's) or `source_file` (`--source-file`: written as `url_file`)."""

    source_env: str | None = None
    source_url: str | None = None
    source_file: str | None = None
    mode: str | None = None
    gcs_bucket: str | None = None
    gcs_credentials_file: str | None = None
    #: `--tls MODE` / `--tls-ca PATH` (Rivet's flags): the posture of init's own connection and
    #: the `source.tls` block the scaffold writes — one value for both, so the config connects
    #: as init did.
    tls: str | None = None
    tls_ca: str | None = None
    table: str | None = None
    schema: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    s3_bucket: str | None = None
    s3_prefix: str = "rivet/"
    s3_region: str | None = None
    s3_endpoint: str | None = None
    s3_access_key_env: str | None = None
    s3_secret_key_env: str | None = None
    output_dir: str = "output"
    format: str = "parquet"
    small_rows: int = SMALL_TABLE_ROWS
    chunk_size: int | None = None


@dataclass
class ScaffoldExport:
    name: str
    report: TableReport
    suggestion: Suggestion
    table_ref: str | None  # `table:` value, or None when a `query:` is needed
    query: str | None = None
    notes: list[str] = field(default_factory=list)


def source_url_from_env(var: str) -> str:
    url = os.environ.get(var)
    if not url:
        raise ConfigError(f"--source-env '{var}' is not set in the environment — export {var}=postgresql://"
                          "user:password@host:5432/db (or mysql://…, sqlite:////path.db) and re-run")
    from rivet_core.config.source_url import (
        normalise_url,
        sqlalchemy_source_url,
        url_scheme_family,
    )

    family = url_scheme_family(url)
    if family is None and "://" in url:  # another dialect's URL: a `type: sqlalchemy` source
        return sqlalchemy_source_url(url, "url_env", Path.cwd())
    if family is None:
        return url  # engine_of names the problem
    # the same parsing as a config's url_env: userinfo up to the last '@', user and password
    # re-encoded, every form of the password registered for redaction, bad hosts refused
    return normalise_url(url, family[1], "url_env", Path.cwd())


def source_url(options: InitOptions) -> str:
    """The URL init connects with, from whichever of the three flags named it (InitOptions)."""
    if options.source_env is not None:
        return source_url_from_env(options.source_env)
    if options.source_file is not None:
        try:
            lines = Path(options.source_file).read_text(encoding="utf-8").strip().splitlines()
        except OSError as exc:
            raise ConfigError(f"--source-file '{options.source_file}' cannot be read: {exc.strerror or exc}") from exc
        url = lines[0].strip() if lines else ""
        if not url:
            raise ConfigError(f"--source-file '{options.source_file}' is empty — write the database URL on its "
                              "first line")
        field_name = "url_file"
    elif options.source_url:
        url, field_name = options.source_url, "--source"
    else:
        raise ConfigError("rivet init needs the database URL: --source-env VAR, --source-file PATH or --source URL")
    from rivet_core.config.source_url import normalise_url, url_scheme_family

    family = url_scheme_family(url)
    return url if family is None else normalise_url(url, family[1], field_name, Path.cwd())


def source_line(options: InitOptions) -> str:
    """The scaffold's connection line, by where the URL came from (InitOptions)."""
    if options.source_env is not None:
        return f"  url_env: {_scalar(options.source_env)}   # the URL (with its password) stays in the environment"
    if options.source_file is not None:
        return (f"  url_file: {_scalar(str(Path(options.source_file).resolve()))}   # reads the URL from this file "
                "(keep it out of version control)")
    return "  url_env: DATABASE_URL   # export DATABASE_URL='<your-url>' before running (--source is never written)"


def _tls(options: InitOptions) -> Any:
    """The TlsConfig of `--tls/--tls-ca`, or None; a CA with a mode that never verifies is
    refused in Rivet's words (it would be silently ignored)."""
    if options.tls is None:
        return None
    if options.tls_ca and options.tls in ("disable", "require"):
        raise ConfigError(f"--tls-ca is meaningless with `--tls {options.tls}`: that mode never verifies the server "
                          "certificate, so the CA would be silently ignored. Use `--tls verify-ca` or `--tls "
                          "verify-full` (or drop --tls-ca).")
    from rivet_core.config.models import TlsConfig

    ca = str(Path(options.tls_ca).resolve()) if options.tls_ca else None
    return TlsConfig(mode=options.tls, ca_file=ca)


def tls_lines(options: InitOptions) -> list[str]:
    """The scaffold's `source.tls` block for `--tls` (none without it)."""
    tls = _tls(options)
    if tls is None:
        return []
    return [f"  tls: {{mode: {tls.mode}" + (f", ca_file: {_scalar(tls.ca_file)}" if tls.ca_file else "") + "}"
            "   # as `rivet init --tls` connected"]


def introspect(options: InitOptions) -> tuple[str, list[ScaffoldExport]]:
    """(engine, one ScaffoldExport per selected table) read from the live database."""
    engine, found = introspect_tables(options)
    used: set[str] = set()
    return engine, [_export_for(dialect, report, suggestion, used) for dialect, report, suggestion in found]


def introspect_tables(options: InitOptions) -> tuple[str, list[tuple[SourceDialect, TableReport, Suggestion]]]:
    """(engine, per selected table its dialect, report and suggestion — `--mode` applied)."""
    from rivet_core.ops.init_modes import check_mode, forced

    check_mode(options.mode)
    if options.table and (options.include or options.exclude):
        raise ConfigError("--table names one table; --include/--exclude filter a --schema — "
                          "use one or the other")
    url = source_url(options)
    engine = engine_of(url)
    tls = _tls(options)
    if tls is not None:
        from rivet_core.config.tls import apply_tls

        url = apply_tls(url, engine, tls, Path.cwd())
    with open_source(url, resolve_tuning(None, None), engine=engine) as session:
        if options.table:
            schema, name = split_table(options.table)
            targets = [(schema or options.schema, name)]
        else:
            names = select_tables(list_tables(session, options.schema), options.include,
                                  options.exclude)
            if not names:
                where = options.schema or "the default schema"
                raise ConfigError(f"no tables selected in {where} of {redact_url(url)} — check "
                                  "--schema and the --include/--exclude globs")
            targets = [(options.schema, n) for n in names]
        found = []
        for schema, name in targets:
            report = describe_table(session, schema, name)
            suggestion = suggest(report, small_rows=options.small_rows, chunk_size=options.chunk_size)
            if options.mode is not None:
                suggestion = forced(report, options.mode, suggestion, options.chunk_size)
            found.append((session.dialect, report, suggestion))
    return engine.partition(":")[0], found  # `sqlalchemy:<dialect>` is `type: sqlalchemy`


def _export_for(dialect: SourceDialect, report: TableReport, suggestion: Suggestion,
                used: set[str]) -> ScaffoldExport:
    base = re.sub(r"[^A-Za-z0-9_]", "_", report.name).strip("_") or "table"
    if base[0].isdigit():
        base = f"t_{base}"
    name, n = base, 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    used.add(name)
    default_schema = dialect.schema_is_default(report.schema)
    parts = [report.name] if default_schema else [report.schema or "", report.name]
    if all(_IDENT.match(p) for p in parts):
        return ScaffoldExport(name, report, suggestion, ".".join(parts))
    # `table:` accepts plain identifiers only; other names are read through a query.
    query = "SELECT * FROM " + ".".join(dialect.quote_ident(p) for p in parts)
    notes = []
    if suggestion.mode == "chunked" and "chunk_by_key" in suggestion.fields:
        suggestion = Suggestion("full", reason=suggestion.reason, overrides=suggestion.overrides,
                                review=suggestion.review)
        notes.append("keyset chunking needs a `table:` name; this name needs quoting, so the "
                     "export is full")
    return ScaffoldExport(name, report, suggestion, None, query, notes)


# --------------------------------------------------------------------------- rendering


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()


def _comment(text: str) -> str:
    return " ".join(text.split())


def render(engine: str, exports: list[ScaffoldExport], options: InitOptions,
           now: datetime | None = None, database: str | None = None) -> str:
    """The commented YAML text (pure). `database`: the server database the URL names,
    written as `source.database` so the names derived from it (an orchestrator's asset
    keys) come from the file, not from the variable."""
    now = now or datetime.now(UTC)
    where = f"--table {options.table}" if options.table else (
        f"schema {options.schema or 'default'}"
        + (f", include {list(options.include)}" if options.include else "")
        + (f", exclude {list(options.exclude)}" if options.exclude else ""))
    lines = [
        f"# Generated by `rivet init` on {now:%Y-%m-%d %H:%M} UTC from a {engine} source ({where}).",
        "# Each export says why it got its mode. Lines marked REVIEW need a human decision",
        "# before the first production run. Check it with: rivet check -c <this file> --type-report",
        "source:",
        f"  type: {engine}",
        source_line(options),
        *tls_lines(options),
        *([f"  database: {_scalar(database)}   # its name, for names derived from it (the URL still connects)"]
          if database else []),
        "",
    ]
    for block in config_blocks().values():  # the installed integrations' top-level blocks
        if block.scaffold_defaults is not None:
            lines += [*block.scaffold_defaults(options.schema or "rivet"), ""]
    lines.append("exports:")
    for exp in exports:
        lines.extend(_render_export(exp, options))
    return "\n".join(lines) + "\n"


def _render_export(exp: ScaffoldExport, options: InitOptions) -> list[str]:
    s = exp.suggestion
    out = ["", f"  # {exp.name}: {_comment(s.reason)}"]
    if exp.report.cursor_candidates and s.mode != "incremental":
        out.append(f"  # cursor candidates (for mode: incremental): "
                   f"{', '.join(exp.report.cursor_candidates)}")
    out += [f"  # REVIEW: {_comment(r)}" for r in s.review + exp.notes]
    out.append(f"  - name: {_scalar(exp.name)}")
    if exp.table_ref is not None:
        out.append(f"    table: {_scalar(exp.table_ref)}")
    else:
        out.append(f"    query: {_scalar(exp.query)}")
    out.append(f"    mode: {s.mode}")
    for key, value in s.fields.items():
        out.append(f"    {key}: {_scalar(value)}")
    out.append(f"    format: {options.format}")
    out += ["    meta_columns:", "      exported_at: true", "      row_hash: true"]
    if s.overrides:
        out.append("    columns:")
        for column, type_text in s.overrides.items():
            out.append(f"      {_scalar(column)}: {_scalar(type_text)}   # REVIEW: unbounded numeric "
                       "in the source — confirm precision and scale (values beyond them fail the run)")
    out += _render_destination(exp.name, options)
    if s.mode in ("full", "incremental"):
        cron = _scalar("0 * * * *" if s.mode == "incremental" else "0 3 * * *")
        for block in config_blocks().values():  # each installed integration schedules it its way
            if block.scaffold_export is not None:
                out += [f"    {line}" for line in block.scaffold_export(cron)]
    return out


def _render_destination(name: str, options: InitOptions) -> list[str]:
    if options.gcs_bucket:  # Rivet's GCS scaffold: prefix exports/<export>/, ADC unless a key file is named
        return ["    destination:", "      type: gcs", f"      bucket: {_scalar(options.gcs_bucket)}",
                f"      prefix: {_scalar(f'exports/{name}/')}",
                *([f"      credentials_file: {_scalar(options.gcs_credentials_file)}"]
                  if options.gcs_credentials_file else [])]
    if not options.s3_bucket:
        path = options.output_dir.rstrip("/") + "/" + name
        return ["    destination:", "      type: local", f"      path: {_scalar(path)}"]
    prefix = options.s3_prefix
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    out = ["    destination:", "      type: s3", f"      bucket: {_scalar(options.s3_bucket)}",
           f"      prefix: {_scalar(f'{prefix}{name}/')}"]
    for key, value in (("region", options.s3_region), ("endpoint", options.s3_endpoint),
                       ("access_key_env", options.s3_access_key_env),
                       ("secret_key_env", options.s3_secret_key_env)):
        if value:
            out.append(f"      {key}: {_scalar(value)}")
    return out


def write_scaffold(options: InitOptions, output: Path, *, force: bool = False) -> list[ScaffoldExport]:
    """Introspect, render, check that the result loads, then write `output`."""
    if output.exists() and not force:
        raise ConfigError(f"'{output}' already exists — pass --force to overwrite it, or choose "
                          "another path with -o")
    engine, exports = introspect(options)
    from rivet_core.config.source_url import database_named_by

    text = render(engine, exports, options, database=database_named_by(engine, source_url(options)))
    _check_loads(text, output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, output)
    return exports


def write_discovery(options: InitOptions) -> str:
    """`rivet init --discover`: Rivet's discovery artifact as JSON text (ops/init_modes.py)."""
    import json

    from rivet_core.ops.init_modes import discovery_artifact, table_discovery

    engine, found = introspect_tables(options)
    # every table's dialect is the session's: the first one answers for all
    default_schema = options.schema or (found[0][0].default_schema if found else "")
    if options.table:
        scope = f"table {options.table}"
    else:
        scope = f"schema \"{options.schema or default_schema or 'default'}\" ({len(found)} objects)"
    tables = [table_discovery(report, suggestion, default_schema=default_schema) for _, report, suggestion in found]
    return json.dumps(discovery_artifact(engine, scope, tables, options.tls), indent=2)


def _check_loads(text: str, output: Path) -> None:
    """Load the rendered text with the real loader (in a temp file next to `output`)."""
    from rivet_core.config import load_config

    probe = output.with_name(f".{output.name}.check.yaml")
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text(text, encoding="utf-8")
    try:
        load_config(str(probe), {})
    except ConfigError as exc:
        raise ConfigError(f"rivet init produced a config that does not load ({exc.message}) — this "
                          "is a bug in init; please report it with the table definitions") from exc
    finally:
        probe.unlink(missing_ok=True)
