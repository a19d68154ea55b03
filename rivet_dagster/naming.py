"""Names Dagster accepts, derived from rivet.yaml (asset keys, groups, pools, check names)."""

from __future__ import annotations

import logging
import re
from pathlib import PurePosixPath

import dagster as dg

from rivet_core import api

log = logging.getLogger("rivet_dagster")

#: How the core names this integration in a lock refusal, the manifest and the run report
#: (`orchestrator`, rivet_core/orchestrator.py).
ORCHESTRATOR = "Dagster"

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def safe_name(text: str) -> str:
    """Dagster names must match [A-Za-z0-9_]+; replace anything else with '_'."""
    cleaned = _UNSAFE.sub("_", text).strip("_") or "x"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


#: Configs whose unnamed database was already reported in this process (`source_name`).
_warned_unnamed: set[str] = set()


def source_name(config: api.RivetConfig) -> str:
    """A short name for the source database, from the config file alone (never the
    environment: a variable unset while the definitions load must not rename the asset
    keys): `source.database` (a SQLite file: its stem), else the database of a literal
    `url`, else the engine's name. For a `url_env` source without `source.database`, a
    warning — once per config and process — names the `database:` line that keeps the
    keys, the default group and the pool naming the database its variable points at."""
    source = config.source
    if source.type == "sqlite":
        path = source.database or (source.url.split("///", 1)[-1] if source.url else None)
        if path:
            return safe_name(PurePosixPath(path).stem)
    else:
        database = api.source_database(config)
        if database:
            return safe_name(database)
    _warn_unnamed(config)
    return safe_name(source.type)


def source_kind(config: api.RivetConfig) -> str:
    """The source's `kind` tag and the engine part of its source asset keys: the engine, or
    a SQLAlchemy source's dialect (`duckdb`, `mssql`, …: `api.source_kind`)."""
    return safe_name(api.source_kind(config))


def _warn_unnamed(config: api.RivetConfig) -> None:
    """The warning of `source_name`, when the variable names a database the keys now do not."""
    named = api.url_env_database(config)
    where = str(config.config_path)
    if not named or where in _warned_unnamed:
        return
    _warned_unnamed.add(where)
    log.warning("rivet config %s: the source asset keys, the default group and the pool use '%s' for "
                "the database — they are taken from the config, never from %s; add `database: %s` "
                "under source: to name it", where, config.source.type, config.source.url_env, named)


def key_prefix(config: api.RivetConfig, export: api.ExportConfig) -> list[str]:
    """The export's `dagster.key_prefix`, else the top-level one, else none."""
    return (export.dagster.key_prefix_list if export.dagster and export.dagster.key_prefix else
            config.dagster.key_prefix_list if config.dagster and config.dagster.key_prefix else [])


def asset_key(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetKey:
    """`[*key_prefix, <export name>]`, the name made Dagster-safe (`a b` → `a_b`)."""
    return dg.AssetKey([*key_prefix(config, export), safe_name(export.name)])


def manifest_asset_key(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetKey:
    """The unpartitioned `<export>_manifest` asset of a chunked export (beside its chunk asset)."""
    key = asset_key(config, export)
    return dg.AssetKey([*key.path[:-1], f"{key.path[-1]}_manifest"])


def derived_name(config: api.RivetConfig, export: api.ExportConfig, suffix: str) -> str:
    """The name of a job, schedule or partitions definition of an export:
    its asset key path joined by `__`, then `_<suffix>` (`orders_job`,
    `sales__raw__orders_schedule`). Asset keys are unique in a code location, so these are
    too — also when several configs are merged; `check_unique_names` catches the rest
    (two export names that sanitize alike)."""
    return "__".join(asset_key(config, export).path) + f"_{suffix}"


def check_unique_names(config: api.RivetConfig, exports: list[api.ExportConfig]) -> None:
    """Refuse two exports whose Dagster names collide after sanitizing (`a b` and `a_b`)."""
    seen: dict[str, str] = {}
    for export in exports:
        slug = derived_name(config, export, "")
        if slug in seen:
            raise api.ConfigError(
                f"exports '{seen[slug]}' and '{export.name}' get the same Dagster asset key "
                f"{asset_key(config, export).to_user_string()!r} (Dagster names allow only letters, "
                "digits and underscores) — rename one of them, or give one its own "
                "dagster.key_prefix")
        seen[slug] = export.name


def group_name(config: api.RivetConfig, export: api.ExportConfig) -> str:
    if export.dagster and export.dagster.group:
        return export.dagster.group
    if config.dagster and config.dagster.group:
        return config.dagster.group
    return source_name(config)


def pool_name(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """Pool per source database: caps concurrent queries on it (dagster.yaml sets limits)."""
    if export.dagster and export.dagster.pool:
        return export.dagster.pool
    if config.dagster and config.dagster.pool:
        return config.dagster.pool
    return f"source_{source_name(config)}"
