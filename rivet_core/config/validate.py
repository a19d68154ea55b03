"""Semantic validation: the cross-field rules of docs/config-reference.md "Errors, for real", after the strict parse.

Every check returns messages instead of raising, so the loader can report all problems
at once. Messages name the export (`export 'x': …`), the key and value at fault, and the
fix; the quoted fragments of the reference catalogue appear verbatim so tests (and
users' scripts) can rely on them. `mode: cdc`'s rules live in cdc_rules.py and
`partition_by`'s in partition_by.py. Chunked
rules that need the source (key types, statistics) are checked at plan time by
`rivet_core.chunks.layout`.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from rivet_core.config.blocks import known_blocks
from rivet_core.config.cdc_rules import cdc_export_errors, cdc_stream_collisions
from rivet_core.config.limits import (
    bound_errors,
    destination_key_errors,
    key_name_problem,
    overlap_errors,
)
from rivet_core.config.messages import Problem
from rivet_core.config.models import DestinationConfig, ExportConfig, RivetConfig, SourceConfig
from rivet_core.config.overrides import parse_column_override, split_column_key
from rivet_core.config.partition_by import partition_errors
from rivet_core.config.sizes import parse_size
from rivet_core.config.source_url import inline_url_password, scheme_problem, url_host_problem
from rivet_core.config.substitution import substitute
from rivet_core.config.templating import template_errors
from rivet_core.config.tuning import merged_tuning_error
from rivet_core.errors import ConfigError
from rivet_core.redact import redact_secrets, register_secret

log = logging.getLogger("rivet.config")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SENSITIVE_HEADER = re.compile(r"(?i)auth|token|key|secret|cookie|signature")
_DEFAULT_CHUNK_SIZE = 100_000


# --------------------------------------------------------------------------- source


def source_errors(src: SourceConfig) -> list[str]:
    """Connection-method rules (`source`: one connection method) and source tuning (14)."""
    errors: list[str] = []
    url_fields = [f for f in ("url", "url_env", "url_file") if getattr(src, f) is not None]
    structured = [
        f
        for f in ("host", "port", "user", "password", "password_env", "database")
        if getattr(src, f) is not None
    ]
    if len(url_fields) > 1:
        errors.append(
            "source: specify exactly one of 'url', 'url_env', or 'url_file' "
            f"(got {len(url_fields)} set: {', '.join(url_fields)}) — keep one, url_env is "
            "recommended"
        )
    # `database` beside a URL form only names the database (for the names an orchestrator
    # derives from it, `api.source_database`); the connection takes the URL's.
    if url_fields and [f for f in structured if f != "database"]:
        structured = [f for f in structured if f != "database"]
        errors.append(
            "source: pick either URL-based config (url, url_env, url_file) OR structured "
            "fields (host, port, user, password / password_env, database), not both — found "
            f"{', '.join(url_fields)} together with {', '.join(structured)}"
        )
    if src.password is not None and src.password_env is not None:
        errors.append(
            "source: specify 'password' OR 'password_env', not both — keep password_env so "
            "the secret stays out of the file"
        )
    if src.type == "sqlalchemy" and src.tls is not None:
        errors.append(
            "source: tls applies to postgres and mysql sources; a sqlalchemy source takes its "
            "TLS settings in the URL's query, as its driver names them (e.g. ?sslmode=verify-full)"
        )
    if src.type == "sqlalchemy" and not url_fields:
        errors.append(
            "source: type sqlalchemy takes one SQLAlchemy URL — set url_env (recommended) or "
            "url, e.g. duckdb:///data/shop.duckdb or mssql+pyodbc://user@host/db"
            + (f"; {', '.join(structured)} do(es) not apply" if structured else "")
        )
    elif not url_fields:
        if src.type == "sqlite":
            extra = [f for f in structured if f != "database"]
            if extra:
                errors.append(
                    f"source: type sqlite takes a file path, so {', '.join(extra)} do(es) not "
                    "apply — set database: path/to/file.db or url: sqlite:///path/to/file.db"
                )
            elif src.database is None:
                errors.append(
                    "source: no connection method configured — for sqlite set "
                    "database: path/to/file.db or url: sqlite:///path/to/file.db"
                )
        elif not structured:
            errors.append(
                "source: no connection method configured — set one of: url_env (recommended: "
                "the name of an env var holding the URL), url, url_file, or the structured "
                "fields host + user + database (+ password_env)"
            )
        else:
            for field in ("host", "user", "database"):
                if getattr(src, field) is None:
                    errors.append(
                        f"source: structured config is missing '{field}' — add "
                        f"source.{field}, or use url_env instead"
                    )
    if src.url is not None and src.type != "sqlalchemy":  # any dialect's scheme: checked at connect
        problem = scheme_problem(src.url, src.type, "url") or url_host_problem(src.url, "url")
        if problem:
            errors.append(problem)
    if (
        src.tuning
        and src.tuning.batch_size is not None
        and src.tuning.batch_size_memory_mb is not None
    ):
        errors.append(
            "source.tuning: batch_size and batch_size_memory_mb are mutually exclusive — keep "
            "batch_size for a fixed fetch window or batch_size_memory_mb for memory-sized batches"
        )
    return errors


def register_source_secrets(src: SourceConfig) -> None:
    """Make passwords written into the file redactable before anything can log them."""
    if src.password:
        register_secret(src.password)
    if src.url:
        password = inline_url_password(src.url)
        if password:
            register_secret(password)  # also its decoded and encoded forms


# --------------------------------------------------------------------------- export shape


def name_error(name: str) -> str | None:
    """Export names become file names and state keys, so they must be filename-safe."""
    if (
        not name.strip()
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or ".." in name
        or "\x00" in name
    ):
        shown = name.replace("\x00", "\\0")
        return (
            f"export name '{shown}' is not filename-safe — it must be non-empty, not start "
            "with '.', and contain no '/', '\\', '..' or NUL; use e.g. orders_daily"
        )
    return key_name_problem(name)


def table_error(label: str, table: str) -> str | None:
    """`table:` must be `name` or `schema.name`, each segment a plain identifier."""
    segments = table.split(".")
    if len(segments) > 2:
        return (
            f"{label}: table '{table}' must be `<name>` or `<schema>.<name>` — use query: "
            "for anything more complex"
        )
    for segment in segments:
        if segment == "":
            return f"{label}: table '{table}' has an empty identifier segment — write schema.name"
        if not _IDENT.match(segment):
            return (
                f"{label}: table '{table}': identifier '{segment}' is invalid — each part must "
                "match [A-Za-z_][A-Za-z0-9_]* (no quotes, spaces or ';'); use query: otherwise"
            )
    return None


def read_query_file(
    exp: ExportConfig,
    config_dir: Path,
    params: Mapping[str, str] | None,
    used: set[str],
) -> str:
    """Read and `${k}`-substitute a query_file, enforcing the path rules (relative, no `..`, inside the config directory)."""
    label = f"export '{exp.name}'"
    qf = exp.query_file or ""
    if PurePosixPath(qf).is_absolute() or PureWindowsPath(qf).is_absolute():
        raise ConfigError(
            f"{label}: query_file must be a relative path (relative to the config directory), "
            f"got '{qf}'"
        )
    if ".." in re.split(r"[\\/]", qf):
        raise ConfigError(
            f"{label}: query_file path must not contain '..' (got '{qf}') — keep SQL files "
            "inside the config directory"
        )
    candidate = config_dir / qf
    base = config_dir.resolve()
    resolved = candidate.resolve()
    if not resolved.is_relative_to(base):
        raise ConfigError(
            f"{label}: query_file '{qf}' resolves outside the config directory ({resolved}) — "
            "keep SQL files inside the config directory"
        )
    if not resolved.exists():
        raise ConfigError(
            f"{label}: query_file '{qf}' not found (looked for {candidate}) — create it or "
            "fix the path"
        )
    try:
        text = resolved.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ConfigError(f"{label}: query_file '{qf}' is a directory, not a SQL file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{label}: cannot read query_file '{qf}': {exc}") from None
    text = substitute(text, params, where=f"query_file '{qf}' of {label}", used=used)
    if not text.strip():
        raise ConfigError(f"{label}: query_file '{qf}' is empty — put a SELECT in it")
    return text


def _what_to_read_errors(exp: ExportConfig, label: str) -> list[str]:
    errors: list[str] = []
    chosen = [f for f in ("query", "query_file", "table") if getattr(exp, f) is not None]
    if not chosen and exp.tables is None:
        errors.append(
            f"{label}: specify exactly one of 'query', 'query_file', 'table', or 'tables' — "
            "e.g. table: public.orders"
        )
    elif len(chosen) > 1:
        errors.append(
            f"{label}: specify exactly one of 'query', 'query_file', 'table', or 'tables' "
            f"(got {len(chosen)} set: {', '.join(chosen)})"
        )
    if exp.query is not None and not exp.query.strip():
        errors.append(f"{label}: query is empty — write a SELECT, or use table:")
    if exp.table is not None:
        problem = table_error(label, exp.table)
        if problem:
            errors.append(problem)
    return errors


# --------------------------------------------------------------------------- modes


def _chunk_knobs_set(exp: ExportConfig) -> list[str]:
    knobs = [
        k
        for k in (
            "chunk_column",
            "chunk_by_key",
            "chunk_count",
            "chunk_size_memory_mb",
            "chunk_max_attempts",
            "change_column",
        )
        if getattr(exp, k) is not None
    ]
    if exp.chunk_checkpoint:
        knobs.append("chunk_checkpoint")
    if exp.keyset_incremental:
        knobs.append("keyset_incremental")
    if exp.chunk_size != _DEFAULT_CHUNK_SIZE:
        knobs.append("chunk_size")
    return knobs


def _chunked_errors(exp: ExportConfig, label: str) -> list[str]:
    errors: list[str] = []
    if exp.chunk_size < 1:
        errors.append(f"{label}: mode: chunked requires chunk_size >= 1 (got {exp.chunk_size})")
    if exp.parallel < 1:
        errors.append(f"{label}: mode: chunked requires parallel >= 1 (got {exp.parallel})")
    if exp.chunk_count is not None and exp.chunk_count < 1:
        errors.append(f"{label}: chunk_count must be >= 1 (got {exp.chunk_count})")
    if exp.chunk_by_days is not None and exp.chunk_by_days < 1:
        errors.append(f"{label}: chunk_by_days must be at least 1 (got {exp.chunk_by_days})")
    if exp.chunk_count is not None and exp.chunk_dense:
        errors.append(f"{label}: chunk_count and chunk_dense are mutually exclusive — keep one")
    if exp.chunk_count is not None and exp.chunk_by_days is not None:
        errors.append(f"{label}: chunk_count and chunk_by_days are mutually exclusive — keep one")
    if exp.chunk_by_days is not None and exp.chunk_dense:
        errors.append(f"{label}: chunk_by_days and chunk_dense cannot be combined — keep one")
    if exp.chunk_size_memory_mb is not None and exp.chunk_size != _DEFAULT_CHUNK_SIZE:
        errors.append(
            f"{label}: chunk_size and chunk_size_memory_mb are mutually exclusive — keep one"
        )
    if exp.keyset_incremental and exp.chunk_by_key is None:
        errors.append(f"{label}: keyset_incremental requires `chunk_by_key:`")
    if exp.table is None and exp.chunk_column is None and exp.chunk_by_key is None:
        errors.append(
            f"{label}: chunked mode needs a chunking strategy. Pick one: chunk_column, "
            "chunk_by_key, chunk_dense, chunk_by_days or chunk_count — a query export must "
            "name its chunk_column (only a table: export can auto-resolve its primary key)"
        )
    return errors


def _mode_errors(exp: ExportConfig, label: str) -> list[str]:
    errors: list[str] = []
    if exp.mode == "incremental":
        if exp.cursor_column is None:
            errors.append(
                f"{label}: incremental mode requires cursor_column — name a column that only "
                "grows, e.g. cursor_column: updated_at"
            )
        if exp.incremental_cursor_mode == "coalesce" and exp.cursor_fallback_column is None:
            errors.append(
                f"{label}: incremental_cursor_mode: coalesce requires cursor_fallback_column — "
                "name the column to use when cursor_column is NULL"
            )
    if exp.cursor_fallback_column is not None and exp.incremental_cursor_mode != "coalesce":
        errors.append(
            f"{label}: cursor_fallback_column is only valid with incremental_cursor_mode: "
            "coalesce — add that line or remove cursor_fallback_column"
        )
    if exp.mode == "time_window":
        if exp.time_column is None:
            errors.append(
                f"{label}: time_window mode requires time_column — name the date/timestamp column"
            )
        if exp.days_window is None:
            errors.append(f"{label}: time_window mode requires days_window — e.g. days_window: 7")
        elif exp.days_window <= 0:
            errors.append(f"{label}: days_window must be >= 1 (got {exp.days_window})")
    if exp.mode != "chunked":
        for knob in _chunk_knobs_set(exp):
            errors.append(
                f"{label}: `{knob}` requires `mode: chunked` (mode is {exp.mode}) — remove it"
            )
        if exp.chunk_dense:
            errors.append(f"{label}: chunk_dense is only valid with mode: chunked — remove it")
        if exp.chunk_by_days is not None:
            errors.append(f"{label}: chunk_by_days requires mode: chunked — remove it")
    if exp.mode == "chunked":
        errors.extend(_chunked_errors(exp, label))
    errors.extend(partition_errors(exp, label))
    return errors


# --------------------------------------------------------------------------- output


#: The destinations both table formats commit to (docs/adr/0009-table-formats.md).
_TABLE_DESTINATIONS = ("local", "s3", "azure", "gcs")


def _table_format_errors(exp: ExportConfig, label: str) -> list[str]:
    """`table_format:` / `merge_on:` (docs/adr/0009-table-formats.md)."""
    errors: list[str] = []
    if exp.layout == "rivet" and exp.table_format is not None:
        errors.append(f"{label}: layout: rivet is not compatible with table_format: {exp.table_format} — the "
                      "table's files stay under data/, where its log references them; remove layout: rivet")
    if exp.iceberg is not None and exp.table_format != "iceberg":
        errors.append(f"{label}: an iceberg: block needs table_format: iceberg (got "
                      f"{exp.table_format or 'none'}) — add table_format: iceberg, or remove the block")
    if exp.table_format is None:
        if exp.merge_on:
            errors.append(f"{label}: merge_on needs a table to merge into — add table_format: delta "
                          "(or iceberg), or remove merge_on")
        return errors
    if exp.table_format == "iceberg":
        errors.extend(_iceberg_errors(exp, label))
    if exp.format != "parquet":
        errors.append(f"{label}: table_format: {exp.table_format} needs format: parquet (got {exp.format})")
    where = _TABLE_DESTINATIONS
    if exp.table_format == "iceberg" and exp.destination.type == "azure" and not exp.destination.account_name:
        # The table's location names the account (tableformat/iceberg_catalog.location_uri).
        errors.append(f"{label}: table_format: iceberg on azure needs destination.account_name — the table's "
                      "location is abfss://<container>@<account>.dfs.core.windows.net/<prefix>, which other "
                      "Iceberg engines read")
    elif exp.destination.type not in where:
        errors.append(f"{label}: table_format: {exp.table_format} writes to {', '.join(where[:-1])} or "
                      f"{where[-1]} destinations, not {exp.destination.type}")
    if exp.retention is not None and exp.table_format == "delta":
        # A Delta retention would be a vacuum, not rivet's gc (docs/adr/0009-table-formats.md).
        errors.append(f"{label}: retention: is not supported with table_format: delta — rivet's gc moves the "
                      "parts of older runs, which the table's older versions (and an incremental export's "
                      "current one) still reference; remove retention and vacuum the table instead: "
                      "deltalake.DeltaTable(<table uri>).vacuum(retention_hours=<N>, dry_run=False) deletes "
                      "the files the table stopped referencing more than N hours ago (rivet validate accepts "
                      "its commits)")
    elif exp.retention is not None:
        errors.append(f"{label}: retention: moves parts the {exp.table_format} table may still reference — "
                      "remove it (compact and vacuum the table with its own tools)")
    if exp.merge_on is not None:
        if exp.mode != "incremental":
            errors.append(f"{label}: merge_on applies to mode: incremental (got {exp.mode}) — remove it")
        if not exp.merge_on or len(set(exp.merge_on)) != len(exp.merge_on):
            errors.append(f"{label}: merge_on must list one or more distinct key columns, e.g. merge_on: [id]")
    return errors


def _iceberg_errors(exp: ExportConfig, label: str) -> list[str]:
    """The `iceberg:` block a `table_format: iceberg` export needs (IcebergConfig)."""
    block = exp.iceberg
    if block is None:
        return [f"{label}: table_format: iceberg needs an iceberg: block naming its catalog, e.g. "
                "iceberg: {catalog_url_env: RIVET_ICEBERG_CATALOG, namespace: lake}"]
    errors: list[str] = []
    if (block.catalog_url is None) == (block.catalog_url_env is None):
        errors.append(f"{label}: iceberg: set exactly one of catalog_url or catalog_url_env (a SQLAlchemy URL: "
                      "sqlite:////path/catalog.db or postgresql://user@host/db)")
    if block.catalog_url is not None:
        scheme = block.catalog_url.split(":", 1)[0].lower()
        if not scheme.startswith(("sqlite", "postgresql", "postgres")):
            errors.append(f"{label}: iceberg.catalog_url must be a sqlite:// or postgresql:// URL for the SQL "
                          f"catalog (got {scheme}://…)")
        password = inline_url_password(block.catalog_url)
        if password:
            register_secret(password)
    if not block.namespace:
        errors.append(f"{label}: iceberg.namespace is required (the catalog namespace the table is created "
                      "in, e.g. namespace: lake)")
    for field, value in (("namespace", block.namespace), ("table", block.table)):
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_]+", value):
            errors.append(f"{label}: iceberg.{field} '{value}' must be letters, digits and _ only")
    return errors


def _compression_errors(exp: ExportConfig, label: str) -> list[str]:
    errors: list[str] = []
    level = exp.compression_level
    if level is not None:
        if exp.format == "csv":
            errors.append(f"{label}: CSV output does not support compression_level — remove it")
        elif exp.compression_profile is None:
            if exp.compression == "zstd" and not 1 <= level <= 22:
                errors.append(f"{label}: zstd compression_level must be 1..22 (got {level})")
            elif exp.compression == "gzip" and not 0 <= level <= 9:
                errors.append(f"{label}: gzip compression_level must be 0..9 (got {level})")
            elif exp.compression not in ("zstd", "gzip"):
                errors.append(
                    f"{label}: compression_level is only supported for zstd and gzip "
                    f"(compression is {exp.compression}) — remove compression_level"
                )
    if exp.max_file_size is not None:
        try:
            parse_size(exp.max_file_size)
        except ConfigError as exc:
            errors.append(f"{label}: {exc.message}")
        if exp.destination.type == "stdout":
            errors.append(
                f"{label}: destination type stdout cannot be split into files — remove "
                "max_file_size or write to local/s3"
            )
    return errors


def _meta_and_override_errors(exp: ExportConfig, label: str) -> list[str]:
    errors: list[str] = []
    row_hash = exp.meta_columns.row_hash
    if isinstance(row_hash, list):
        if not row_hash:
            errors.append(
                f"{label}: meta_columns.row_hash is an empty list — that attests nothing; use "
                "true (all columns) or list the columns to hash"
            )
        seen: set[str] = set()
        for col in row_hash:
            if col in seen:
                errors.append(f"{label}: meta_columns.row_hash lists '{col}' twice — remove one")
            seen.add(col)
    bare_seen: dict[str, str] = {}
    parts = exp.table_parts if exp.table is not None and not table_error(label, exp.table) else None
    for key, type_text in exp.columns.items():
        qualifier, column = split_column_key(key)
        try:
            parse_column_override(type_text, column=key)
        except ConfigError as exc:
            errors.append(f"{label}: {exc.message}")
        if qualifier is not None:
            if exp.table is None:
                errors.append(
                    f"{label}: column override '{key}' is table-qualified, which needs a "
                    f"table-shaped export (table:) — write '{column}' instead"
                )
            elif parts is not None:
                schema, name = parts
                accepted = {name.lower()} | ({f"{schema}.{name}".lower()} if schema else set())
                if qualifier.lower() not in accepted:
                    errors.append(
                        f"{label}: column override '{key}' names table '{qualifier}', but the "
                        f"export does not capture it (table: {exp.table}) — write "
                        f"'{column}' or '{name}.{column}'"
                    )
        if column in bare_seen:
            errors.append(
                f"{label}: column '{column}' is overridden twice ('{bare_seen[column]}' and "
                f"'{key}') — keep one"
            )
        bare_seen.setdefault(column, key)
    return errors


def _quality_errors(exp: ExportConfig, label: str) -> list[str]:
    q = exp.quality
    if q is None:
        return []
    errors = [
        f"{label}: quality.null_ratio_max for '{col}' must be between 0 and 1 (got {ratio})"
        for col, ratio in q.null_ratio_max.items()
        if not 0 <= ratio <= 1
    ]
    if (
        q.row_count_min is not None
        and q.row_count_max is not None
        and q.row_count_min > q.row_count_max
    ):
        errors.append(
            f"{label}: quality.row_count_min ({q.row_count_min}) is greater than row_count_max "
            f"({q.row_count_max}) — no run could pass"
        )
    return errors


# --------------------------------------------------------------------------- destination


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _endpoint_host(endpoint: str) -> str:
    text = endpoint if "://" in endpoint else f"http://{endpoint}"
    try:
        return urllib.parse.urlsplit(text).hostname or ""
    except ValueError:
        return ""


_GCS_BUCKET_CHARS = re.compile(r"[a-z0-9_.-]+")
_DOTTED_QUAD = re.compile(r"\d{1,3}(\.\d{1,3}){3}")


def gcs_bucket_problem(name: str) -> str | None:
    """Why `name` is not a GCS bucket name (Google's published naming rules), or None.
    Checked at load so a bad name is one config error naming the field, not the client
    library's bare ValueError at the first request (which checks only the first and last
    character)."""
    if not 3 <= len(name) <= (222 if "." in name else 63):
        return "it must be 3-63 characters long (up to 222 when it contains dots)"
    if not _GCS_BUCKET_CHARS.fullmatch(name):
        return "it may only hold lowercase letters, digits, '-', '_' and '.'"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "it must start and end with a letter or a digit"
    if any(not 1 <= len(label) <= 63 for label in name.split(".")):
        return "each dot-separated part must be 1-63 characters long"
    if _DOTTED_QUAD.fullmatch(name):
        return "it must not look like an IP address"
    if name.startswith("goog") or "google" in name:
        return "it must not begin with 'goog' or contain 'google'"
    return None


def _gcs_errors(dest: DestinationConfig, label: str) -> list[str]:
    errors = []
    if not dest.bucket:
        errors.append(f"{label}: GCS destination requires 'bucket' — set destination.bucket")
    elif (problem := gcs_bucket_problem(dest.bucket)) is not None:
        errors.append(f"{label}: destination.bucket {dest.bucket!r} is not a valid GCS bucket name: {problem} — "
                      "fix destination.bucket (GCS names are lowercase letters, digits, '-', '_' and '.', "
                      "starting and ending with a letter or digit)")
    if dest.allow_anonymous and dest.credentials_file:
        errors.append(
            f"{label}: GCS allow_anonymous: true and credentials_file contradict each other — "
            "remove credentials_file to read and write without credentials, or allow_anonymous "
            "to use the key file")
    return errors


def _azure_errors(dest: DestinationConfig, label: str) -> list[str]:
    errors = []
    if not dest.bucket:
        errors.append(
            f"{label}: Azure destination requires 'bucket' (the container) — set destination.bucket")
    if not dest.account_name:
        errors.append(
            f"{label}: Azure destination requires 'account_name' (the storage account) — set "
            "destination.account_name")
    if dest.account_key_env and dest.sas_token_env:
        errors.append(
            f"{label}: Azure takes account_key_env or sas_token_env, not both — keep the one "
            "whose environment variable holds the credential to use")
    if dest.allow_anonymous and (dest.account_key_env or dest.sas_token_env):
        errors.append(
            f"{label}: Azure allow_anonymous: true cannot be combined with "
            f"{'account_key_env' if dest.account_key_env else 'sas_token_env'} — remove one of them")
    return errors


def credentials_file_errors(exp: ExportConfig, config_dir: Path) -> list[str]:
    """A GCS credentials_file must exist when the config is loaded (relative
    paths are relative to the config file's directory)."""
    dest = exp.destination
    if dest.type != "gcs" or not dest.credentials_file:
        return []
    path = Path(dest.credentials_file).expanduser()
    if not (path if path.is_absolute() else config_dir / path).is_file():
        return [f"export '{exp.name}': credentials_file '{dest.credentials_file}' does not exist — "
                "fix destination.credentials_file (a service-account JSON key file)"]
    return []


def destination_errors(dest: DestinationConfig, label: str, export_name: str) -> list[str]:
    """Destination rules (the GCS credentials_file path is checked by `credentials_file_errors`,
    which knows the config directory)."""
    errors: list[str] = []
    if dest.type == "gcs":
        errors.extend(_gcs_errors(dest, label))
    if dest.type == "azure":
        errors.extend(_azure_errors(dest, label))
    if dest.type == "local":
        for field in ("path", "prefix"):
            value = getattr(dest, field)
            if value is not None and ".." in re.split(r"[\\/]", value):
                errors.append(
                    f"{label}: local destination path must not contain a '..' component "
                    f"(destination.{field} is '{value}') — use a path below the working "
                    "directory or an absolute path"
                )
    for field in ("path", "prefix", "bucket"):
        value = getattr(dest, field)
        if value is not None and "\x00" in value:  # the OS refuses it later with a bare ValueError
            errors.append(f"{label}: destination.{field} contains a NUL character — remove it")
    if dest.type == "s3":
        if not dest.bucket:
            errors.append(f"{label}: S3 destination requires 'bucket' — set destination.bucket")
        if (dest.access_key_env is None) != (dest.secret_key_env is None):
            only = "access_key_env" if dest.access_key_env is not None else "secret_key_env"
            errors.append(
                f"{label}: S3 requires both access_key_env and secret_key_env, or neither "
                f"(only {only} is set)"
            )
    if dest.endpoint is not None and not dest.allow_anonymous:
        if not _is_loopback(_endpoint_host(dest.endpoint)):
            errors.append(
                f"{label}: destination.endpoint '{redact_secrets(dest.endpoint)}' points at a "
                "non-loopback host — custom endpoints must be localhost, 127.0.0.0/8 or ::1 "
                "unless allow_anonymous: true"
            )
    errors.extend(template_errors(dest, export_name))
    return errors


# --------------------------------------------------------------------------- whole config


def export_errors(exp: ExportConfig, source: SourceConfig) -> list[str]:
    """Every rule for one export, in the order a user would fix them."""
    label = f"export '{exp.name}'"
    errors: list[str] = []
    bad_name = name_error(exp.name)
    if bad_name:
        errors.append(bad_name)
    errors.extend(_what_to_read_errors(exp, label))
    errors.extend(_mode_errors(exp, label))
    errors.extend(cdc_export_errors(exp, label, source.type))
    errors.extend(_compression_errors(exp, label))
    errors.extend(_table_format_errors(exp, label))
    errors.extend(_meta_and_override_errors(exp, label))
    errors.extend(_quality_errors(exp, label))
    tuning = merged_tuning_error(exp.name, exp.tuning, source.tuning)
    if tuning:
        errors.append(tuning)
    errors.extend(destination_errors(exp.destination, label, exp.name))
    errors.extend(destination_key_errors(exp, label))
    if exp.retention is not None and exp.destination.type == "stdout":
        errors.append(
            f"{label}: retention keeps runs at a destination prefix, and a stdout destination has "
            "none — remove retention or write to local/s3"
        )
    for name, block in known_blocks().items():  # the integration blocks' own checks (blocks.py)
        if block.check_export is not None:
            errors.extend(block.check_export(exp, exp.integration(name), label))
    return errors


def _notification_errors(cfg: RivetConfig) -> list[str]:
    errors: list[str] = []
    notes = cfg.notifications
    if notes is None:
        return errors
    for block, url_key in (("slack", "webhook_url"), ("webhook", "url")):
        conf = getattr(notes, block)
        if conf is None:
            continue
        url, env = getattr(conf, url_key), getattr(conf, f"{url_key}_env")
        if url is not None and env is not None:
            errors.append(
                f"notifications.{block}: set {url_key} or {url_key}_env, not both — "
                f"{url_key}_env keeps the URL out of the file"
            )
        elif url is None and env is None:
            errors.append(f"notifications.{block}: set {url_key}_env (recommended) or {url_key}")
        if url is not None:
            if block == "slack":
                register_secret(url)
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                errors.append(f"notifications.{block}.{url_key} must be an http:// or https:// URL")
    if notes.webhook is not None:
        for header, value in notes.webhook.headers.items():
            if _SENSITIVE_HEADER.search(header):
                register_secret(value)
    return errors


def config_errors(cfg: RivetConfig) -> list[str]:
    """All semantic problems of a parsed config (query files are read by the loader)."""
    if not cfg.exports:
        return []
    errors = source_errors(cfg.source)
    seen: set[str] = set()
    for exp in cfg.exports:
        if exp.name in seen:
            errors.append(
                Problem(
                    f"duplicate export name '{exp.name}' — export names must be unique (they key "
                    "files and state)",
                    code="RIVET_CONFIG_DUPLICATE_EXPORT",
                )
            )
        seen.add(exp.name)
        errors.extend(export_errors(exp, cfg.source))
        errors.extend(credentials_file_errors(exp, cfg.config_dir))
    errors.extend(_notification_errors(cfg))
    errors.extend(bound_errors(cfg))
    errors.extend(overlap_errors(cfg))
    errors.extend(cdc_stream_collisions(cfg))
    return errors


#: Keys Rivet acts on that load here but change nothing: why, and what to do instead
#: (docs/rivet-compat.md "Rivet keys accepted without effect").
_NO_EFFECT: dict[str, str] = {
    "parallel_exports": "`rivet run` exports one export at a time here — run exports concurrently as "
                        "assets of the orchestrator integration, or as several `rivet run -e <export>` processes; then remove the key",
    "parallel_export_processes": "`rivet run` exports one export at a time here — run one `rivet run -e "
                                 "<export>` process per export (or orchestrator assets); then remove the key",
    "adaptive (tuning)": "Rivet's adaptive worker governor is not implemented — pacing comes from "
                       "`tuning.profile` (balanced/safe); remove the key",
    "min_parallel (tuning)": "Rivet's adaptive worker governor is not implemented — set `parallel:` on the "
                           "chunked export; remove the key",
    "shape_drift_warn_factor": "the column-width drift warning is not implemented (schema drift is "
                               "checked by `on_schema_drift`); remove the key",
    "load": "it configures Rivet's `rivet load` into a warehouse, which this tool does not have — load "
            "the exported Parquet with the warehouse's own loader; the block can stay",
    "planning hints (parallel_safe, source_group, reconcile_required, target)":
        "they steer Rivet's concurrent scheduling and `check`, which this tool does not have (exports run one "
        "at a time; `wave:` orders `rivet apply <config.yaml>`) — group exports in the orchestrator; the keys "
        "can stay",
}


_HINTS = ("parallel_safe", "source_group", "reconcile_required", "target")


def _set(model: Any, field: str) -> bool:
    """Whether the config itself sets `field` on `model` to something other than off."""
    return model is not None and field in model.model_fields_set and getattr(model, field) not in (None, False)


def no_effect_keys(cfg: RivetConfig) -> dict[str, list[str]]:
    """Rivet keys this config sets that load but change nothing here: key → the exports
    (`*` = the whole config) that set it. Read by name from `_NO_EFFECT`'s keys, so the
    reference's "no effect" stays true: nothing else reads them."""
    found: dict[str, list[str]] = {}
    for key in ("parallel_exports", "parallel_export_processes", "load"):
        if _set(cfg, key):
            found[key] = ["*"]
    hints = f"planning hints ({', '.join(_HINTS)})"
    for exp in cfg.exports:
        for key, hit in ((f"{knob} (tuning)", _set(exp.tuning, knob) or _set(cfg.source.tuning, knob))
                         for knob in ("adaptive", "min_parallel")):
            if hit:
                found.setdefault(key, []).append(exp.name)
        if _set(exp, "shape_drift_warn_factor"):
            found.setdefault("shape_drift_warn_factor", []).append(exp.name)
        if any(_set(exp, hint) for hint in _HINTS):
            found.setdefault(hints, []).append(exp.name)
    return found


def emit_warnings(cfg: RivetConfig) -> None:
    """Non-fatal advice, logged once per load."""
    cfg.source.warn_plaintext_password_once()
    for note in cfg._load_notes:
        log.warning("%s", note)
    for key, exports in no_effect_keys(cfg).items():
        where = "the config" if exports == ["*"] else "export(s) " + ", ".join(f"'{e}'" for e in exports)
        log.warning("%s sets %s, which has no effect here: %s", where, key, _NO_EFFECT[key])
    for exp in cfg.exports:
        conflict = exp.compression_conflict()
        if conflict:
            log.warning("%s", conflict)
