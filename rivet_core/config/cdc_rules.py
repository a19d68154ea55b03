"""The rules a `mode: cdc` export must satisfy (docs/config-reference.md `exports[].cdc`).

They live here rather than in validate.py so the batch rules stay readable; validate.py
calls `cdc_export_errors` for each export and `cdc_stream_collisions` once per config.

Why the collision rule counts defaults: a PostgreSQL slot has one consumer (a second export
would advance it past changes the first never read), a MySQL `server_id` one connection (the
server drops the older one) and a checkpoint file one writer. Two exports that leave the
slot unset both resolve to `rivet_slot` and collide just as surely as two that spell it.
"""

from __future__ import annotations

from pathlib import Path

from rivet_core.config.cdc import DEFAULT_SERVER_ID, DEFAULT_SLOT, CdcConfig
from rivet_core.config.models import ExportConfig, RivetConfig


def captured_tables(exp: ExportConfig) -> list[str]:
    """The tables a CDC export captures, in config order: `tables:` or the one `table:`."""
    if isinstance(exp.tables, list):
        return [str(t) for t in exp.tables]
    return [exp.table] if exp.table else []


def _tables_errors(exp: ExportConfig, label: str) -> list[str]:
    tables = exp.tables
    if tables is None:
        return []
    if not isinstance(tables, list) or not tables or not all(isinstance(t, str) and t.strip() for t in tables):
        return [f"{label}: `tables:` must be a non-empty list of table names — e.g. tables: [orders, users]"]
    if exp.table is not None:
        return [f"{label}: set `table:` or `tables:`, not both — `tables:` multiplexes several tables "
                "through one stream"]
    dupes = sorted({t for t in tables if tables.count(t) > 1})
    if dupes:
        return [f"{label}: `tables:` names {', '.join(dupes)} more than once — list each table once"]
    return []


#: Batch knobs a change stream has no use for, and what to do instead.
_NOT_WITH_CDC = {
    "cursor_column": "a change stream resumes from its log position — remove cursor_column",
    "time_column": "a change stream is not windowed by time — remove time_column",
    "days_window": "a change stream is not windowed by time — remove days_window",
    "max_file_size": "CDC parts are cut by change count at a transaction's end — use cdc.rollover",
    "table_format": "applying changes to a Delta/Iceberg mirror is not supported yet — remove table_format",
    "merge_on": "applying changes to a mirror table is not supported yet — remove merge_on",
}


def cdc_export_errors(exp: ExportConfig, label: str, source_type: str) -> list[str]:
    """The per-export rules: what `mode: cdc` needs and what it refuses."""
    errors = _tables_errors(exp, label)
    if exp.mode != "cdc":
        if exp.tables is not None:
            errors.append(f"{label}: `tables:` is only valid with `mode: cdc` — define one export per "
                          "table with `table:`, or set mode: cdc")
        if exp.cdc is not None:
            errors.append(f"{label}: the `cdc:` block is only valid with `mode: cdc` (mode is "
                          f"{exp.mode}) — remove it, or set mode: cdc")
        return errors
    if exp.query is not None or exp.query_file is not None:
        errors.append(f"{label}: mode: cdc captures a table's changes, not a query's — set `table:` "
                      "(or `tables:`) instead of query/query_file")
    elif exp.table is None and exp.tables is None:
        errors.append(f"{label}: mode: cdc needs `table:` or `tables:` — e.g. table: public.orders")
    if source_type == "sqlite":
        errors.append(f"{label}: mode: cdc needs a PostgreSQL or MySQL/MariaDB source (SQLite has no "
                      "change log) — use mode: full or incremental")
    for key, why in _NOT_WITH_CDC.items():
        if getattr(exp, key) not in (None, False, ""):
            errors.append(f"{label}: `{key}` is not compatible with mode: cdc — {why}")
    if exp.destination.type == "stdout":
        errors.append(f"{label}: mode: cdc cannot write to stdout — its exactly-once resume reads the "
                      "published manifest; write to local, s3, gcs or azure")
    cdc = exp.cdc or CdcConfig()
    if source_type == "mysql" and cdc.initial == "snapshot" and not cdc.checkpoint:
        errors.append(f"{label}: cdc.initial: snapshot on MySQL/MariaDB needs cdc.checkpoint — the "
                      "checkpoint is the anchor taken before the snapshot; set cdc.checkpoint: <file>")
    if source_type == "postgres" and cdc.server_id is not None:
        errors.append(f"{label}: cdc.server_id is a MySQL/MariaDB binlog setting — PostgreSQL reads "
                      "through cdc.slot; remove server_id")
    if source_type == "mysql" and (cdc.slot is not None or cdc.publication is not None):
        errors.append(f"{label}: cdc.slot/cdc.publication are PostgreSQL settings — MySQL/MariaDB "
                      "reads the binlog as a replica with cdc.server_id; remove them")
    if not cdc.until_current:
        errors.append(f"{label}: cdc.until_current: false (stream forever) is not supported — each run "
                      "drains to the log's end as of its start; schedule runs instead")
    return errors


def cdc_stream_collisions(cfg: RivetConfig) -> list[str]:
    """Two CDC exports resolving to one slot / server_id / checkpoint (module docstring)."""
    claims: dict[tuple[str, str], list[str]] = {}
    for exp in cfg.exports:
        if exp.mode != "cdc":
            continue
        cdc = exp.cdc or CdcConfig()
        keys: list[tuple[str, str]] = []
        if cfg.source.type == "postgres":
            keys.append(("slot", cdc.resolved_slot))
        if cfg.source.type == "mysql":
            keys.append(("server_id", str(cdc.resolved_server_id)))
        if cdc.checkpoint:
            keys.append(("checkpoint", str((cfg.config_dir / Path(cdc.checkpoint)).resolve())))
        for key in keys:
            claims.setdefault(key, []).append(exp.name)
    errors = []
    for (what, value), names in claims.items():
        if len(names) > 1:
            defaulted = " (the default)" if value in (DEFAULT_SLOT, str(DEFAULT_SERVER_ID)) else ""
            errors.append(f"exports {', '.join(repr(n) for n in names)} resolve to the same cdc.{what} "
                          f"'{value}'{defaulted} — a change stream has one consumer; set a distinct "
                          f"cdc.{what} on each export, or capture the tables through one export with "
                          "`tables:`")
    return errors
