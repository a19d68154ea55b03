"""Names Dagster accepts, derived from rivet.yaml (asset keys, groups, pools, check names)."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import PurePosixPath

import dagster as dg

from rivet_core import api

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def safe_name(text: str) -> str:
    """Dagster names must match [A-Za-z0-9_]+; replace anything else with '_'."""
    cleaned = _UNSAFE.sub("_", text).strip("_") or "x"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def source_name(config: api.RivetConfig) -> str:
    """A short name for the source database: the database (or SQLite file) name."""
    url = config.source.resolve_url(config.config_dir) if config.source.type == "sqlite" else None
    if url:
        return safe_name(PurePosixPath(url.split("///", 1)[-1]).stem)
    if config.source.database:
        return safe_name(config.source.database)
    raw = config.source.url or ""
    if raw:
        path = urllib.parse.urlsplit(raw).path.strip("/")
        if path:
            return safe_name(path.split("/")[0])
    return safe_name(config.source.type)


def asset_key(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetKey:
    prefix = (export.dagster.key_prefix_list if export.dagster and export.dagster.key_prefix else
              config.dagster.key_prefix_list if config.dagster and config.dagster.key_prefix else [])
    return dg.AssetKey([*prefix, export.name])


def manifest_asset_key(config: api.RivetConfig, export: api.ExportConfig) -> dg.AssetKey:
    """The unpartitioned `<export>_manifest` asset of a chunked export (beside its chunk asset)."""
    return dg.AssetKey([*asset_key(config, export).path[:-1], f"{export.name}_manifest"])


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
