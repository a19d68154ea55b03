"""What every export asset declares, whatever its mode: one place for the shared `@dg.asset`
arguments, so a plain export, a chunk asset, its manifest and a whole-run chunked export
show the same standard metadata, lineage, code version and automation.

- metadata on the definition: `dagster/uri` (the destination prefix, credentials
  redacted), `dagster/table_name` (the export's dataset name), a code reference to the
  export's line in rivet.yaml (the UI links to it), and the `rivet/*` keys the IO manager
  reads (`rivet/config`: which rivet.yaml; `rivet/export`; `rivet/mode`; `rivet/role`);
- `deps`: the source table's asset (rivet_dagster/lineage.py);
- `code_version`: a hash of the export's effective config, so Dagster marks the asset
  changed when what it exports changes (a new query, columns, format, destination…);
- `automation_condition` from `dagster.automation_condition` (rivet_dagster/automation.py).

No connection and no environment lookup happens here: a code location with hundreds of
exports loads from the file alone.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from rivet_core import api
from rivet_dagster.lineage import source_table_key
from rivet_dagster.naming import group_name, pool_name, safe_name
from rivet_dagster.store_clients import required_keys


def code_version(config: api.RivetConfig, export: api.ExportConfig) -> str:
    """sha256 (16 hex) of what decides the exported data: the export's fields (but not its
    description or Dagster-only block) and the source engine and database."""
    fields = export.model_dump(mode="json", exclude={"description", "dagster"})
    source = {"type": config.source.type, "database": config.source.database}
    blob = json.dumps({"export": fields, "source": source}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@lru_cache(maxsize=64)
def _export_lines(path: str, mtime_ns: int) -> dict[str, int]:
    """Export name → 1-based line of its entry in the YAML file (compose only: no alias
    expansion, no construction)."""
    del mtime_ns  # part of the cache key only
    try:
        # libyaml's composer when PyYAML has it (10x the pure-Python one on big configs)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    if not isinstance(root, yaml.MappingNode):
        return {}
    lines: dict[str, int] = {}
    for key, value in root.value:
        if getattr(key, "value", None) != "exports" or not isinstance(value, yaml.SequenceNode):
            continue
        for item in value.value:
            if not isinstance(item, yaml.MappingNode):
                continue
            for k, v in item.value:
                if getattr(k, "value", None) == "name" and isinstance(v, yaml.ScalarNode):
                    lines.setdefault(str(v.value), item.start_mark.line + 1)
    return lines


def export_line(config: api.RivetConfig, export: api.ExportConfig) -> int | None:
    path = config.config_path
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _export_lines(str(path), mtime).get(export.name)


def code_references(config: api.RivetConfig, export: api.ExportConfig) -> dg.CodeReferencesMetadataValue:
    """A link to the export's entry in rivet.yaml (its first line)."""
    return dg.CodeReferencesMetadataValue(code_references=[dg.LocalFileCodeReference(
        file_path=str(config.config_path), line_number=export_line(config, export) or 1,
        label=f"rivet.yaml: {export.name}")])


#: (config path, state store mtime) → its schema baselines: read once per build, not per export.
_BASELINES: dict[tuple[str, int], dict[str, list[dict[str, str]]]] = {}


def known_columns(config: api.RivetConfig, export: api.ExportConfig) -> dg.TableSchema | None:
    """The export's columns as its last run recorded them (the schema-drift baseline in the
    state store), for `dagster/column_schema` on the definition; None before the first run."""
    try:
        mtime = config.state_path.stat().st_mtime_ns
    except OSError:
        return None
    key = (str(config.config_path), mtime)
    if key not in _BASELINES:
        _BASELINES.clear()  # one config's baselines at a time: a bounded cache
        _BASELINES[key] = api.schema_baselines(config)
    columns = _BASELINES[key].get(export.name)
    if not columns:
        return None
    return dg.TableSchema(columns=[dg.TableColumn(name=str(c.get("name")), type=str(c.get("type", "")))
                                   for c in columns])


def definition_metadata(config: api.RivetConfig, export: api.ExportConfig,
                        role: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "dagster/uri": api.destination_uri(config, export),
        "dagster/table_name": safe_name(export.name),
        "dagster/code_references": code_references(config, export),
        "rivet/config": str(config.config_path),
        "rivet/export": export.name,
        "rivet/mode": export.mode,
    }
    if role:
        meta["rivet/role"] = role
    columns = known_columns(config, export) if role != "chunks" else None
    if columns is not None:
        meta["dagster/column_schema"] = columns
    return meta


def retry_policy(config: api.RivetConfig, export: api.ExportConfig) -> dg.RetryPolicy:
    """Transient failures retry as the export's tuning says (the core's own retries are off
    under Dagster, so each retry shows in the UI)."""
    tuning = export.resolved_tuning(config.source)
    return dg.RetryPolicy(max_retries=tuning.max_retries, delay=tuning.retry_backoff_ms / 1000.0,
                          backoff=dg.Backoff.EXPONENTIAL)


def shared_asset_kwargs(config: api.RivetConfig, export: api.ExportConfig,
                        role: str | None = None) -> dict[str, Any]:
    """The `@dg.asset` arguments every export asset shares (module docstring)."""
    from rivet_dagster.automation import automation_condition, freshness_policy

    source = source_table_key(config, export)
    kwargs: dict[str, Any] = {
        "group_name": group_name(config, export),
        "pool": pool_name(config, export),
        "metadata": definition_metadata(config, export, role),
        "code_version": code_version(config, export),
        "io_manager_key": "rivet_io_manager",
        "deps": [source] if source is not None and role != "manifest" else [],
    }
    keys = required_keys(export)
    if keys:
        kwargs["required_resource_keys"] = keys
    if role in (None, "run"):  # chunk windows and their manifest are driven by the planner
        kwargs["automation_condition"] = automation_condition(config, export)
        kwargs["freshness_policy"] = freshness_policy(config, export)
    return kwargs
