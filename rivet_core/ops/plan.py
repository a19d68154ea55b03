"""`rivet plan` artifacts: a reviewable JSON record of what `rivet apply` will run.

A plan freezes, per export, the strategy, the chunk windows (from the chunk planner, the
same call the chunked runner makes) or the time window, the state cursor it starts from,
the row estimate and the `check` diagnostics — plus the config path and a hash of the
*resolved* config (after `${VAR}` substitution, query files included). Credentials never
enter the artifact: the embedded config has `password` dropped, URL userinfo and webhook
URLs/headers redacted, and the whole document passes through `redact_secrets`.

`apply` re-validates before running anything, because a plan is only worth reviewing if
what runs is what was reviewed. A plan is stale when

- it is older than `max_age` (default 24 h; the time window and the estimates drift);
- the config changed (hash mismatch) — the reviewed settings are not the ones that would run;
- an export's state cursor moved (another run exported rows since) — the plan's
  "rows after cursor X" no longer describes the run;
- a chunked export's windows changed (the source grew or shrank across a window).

Stale plans are refused with the reason and the fix (re-run `rivet plan`, or `--force`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rivet_core import __version__
from rivet_core.config.models import ExportConfig, RivetConfig
from rivet_core.errors import ConfigError
from rivet_core.redact import redact_secrets, redact_url
from rivet_core.source.base import SourceSession

SCHEMA_VERSION = 1
KIND = "rivet.plan"
DEFAULT_MAX_AGE = timedelta(hours=24)


def config_hash(config: RivetConfig) -> str:
    """sha256 of the resolved config: every field after substitution + each export's SQL."""
    payload = {
        "config": config.model_dump(mode="json"),
        "queries": {e.name: _resolved_query(e) for e in config.exports},
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _resolved_query(export: ExportConfig) -> str | None:
    try:
        return export.resolved_query
    except ConfigError:
        return None


def redacted_config(config: RivetConfig) -> dict[str, Any]:
    """The resolved config without secrets: no `password`, URL userinfo → REDACTED."""
    data = config.model_dump(mode="json", exclude_none=True)
    source = data.get("source", {})
    source.pop("password", None)
    if "url" in source:
        source["url"] = redact_url(source["url"])
    for export in data.get("exports") or []:  # an Iceberg catalog URL may carry a password
        block = export.get("iceberg") or {}
        if "catalog_url" in block:
            block["catalog_url"] = redact_url(block["catalog_url"])
    # Webhook URLs and headers are bearer credentials (a Slack hook URL *is* its secret).
    notes = data.get("notifications") or {}
    if "webhook_url" in (notes.get("slack") or {}):
        notes["slack"]["webhook_url"] = "REDACTED"
    hook = notes.get("webhook") or {}
    if "url" in hook:
        hook["url"] = "REDACTED"
    if hook.get("headers"):
        hook["headers"] = {name: "REDACTED" for name in hook["headers"]}
    return json.loads(redact_secrets(json.dumps(data)))


def cursor_snapshot(state: Any, export: ExportConfig) -> dict[str, Any]:
    """The state this export's next run starts from."""
    snap: dict[str, Any] = {"cursor_column": export.cursor_column, "value": state.get_cursor(export.name)}
    if export.mode == "chunked":
        run = state.get_latest_chunk_run(export.name)
        snap["chunk_run"] = None if run is None else {"run_id": run.run_id, "status": run.status}
    return snap


def chunk_section(session: SourceSession, export: ExportConfig) -> dict[str, Any]:
    """The chunk planner's windows for a chunked export (None plan = small-table full run)."""
    from rivet_core.chunks.layout import lay_out_windows

    plan = lay_out_windows(session, export, base_sql=export.resolved_query, table_parts=export.table_parts)
    if plan is None:
        return {"strategy": "full (small-table fallback)", "windows": [], "plan_hash": None}
    return {
        "strategy": plan.strategy, "column": plan.column, "size": plan.size,
        "plan_hash": plan.plan_hash, "window_count": len(plan.windows),
        "windows": [{"index": w.index, "lo": w.lo, "hi": w.hi, "key": w.key} for w in plan.windows],
        "warnings": list(plan.warnings),
    }


def time_section(export: ExportConfig, now: datetime) -> dict[str, Any]:
    """The single time window a `rivet run` of a time_window export reads."""
    from rivet_core.unit.resolve import time_window_cutoff

    assert export.days_window is not None
    cutoff = time_window_cutoff(export.days_window, now)
    return {"time_column": export.time_column,
            "windows": [{"start": cutoff.isoformat(), "end": None, "note": "open-ended (>= start)"}]}


def build_plan(config: RivetConfig, export_names: list[str] | None, *,
               now: datetime | None = None) -> dict[str, Any]:
    """Probe the source and the state store; return the plan document (not yet written)."""
    from rivet_core.introspect.diagnose import diagnose_export
    from rivet_core.source import open_source
    from rivet_core.state import StateStore

    now = now or datetime.now(UTC)
    exports = config.select(export_names)
    state = StateStore.open(config.config_path)
    entries = []
    try:
        tuning = exports[0].resolved_tuning(config.source)
        with open_source(config.source_url(), tuning, engine=config.source.type) as session:
            for export in exports:
                diag = diagnose_export(session, export)
                if diag.error:
                    raise ConfigError(f"export '{export.name}' cannot be planned: {diag.error}")
                entry: dict[str, Any] = {
                    "export_name": export.name, "mode": export.mode, "strategy": diag.strategy,
                    "row_estimate": diag.row_estimate,
                    "cursor_snapshot": cursor_snapshot(state, export),
                    "diagnostics": diag.to_dict(type_report=True),
                }
                if export.mode == "chunked":
                    entry["chunks"] = chunk_section(session, export)
                    entry["windows"] = entry["chunks"]["windows"]
                elif export.mode == "time_window":
                    entry["windows"] = time_section(export, now)["windows"]
                else:
                    entry["windows"] = []
                entries.append(entry)
    finally:
        state.close()
    doc = {
        "schema_version": SCHEMA_VERSION, "kind": KIND, "rivet_version": __version__,
        "plan_id": uuid.uuid4().hex, "created_at": now.isoformat(),
        "expires_at": (now + DEFAULT_MAX_AGE).isoformat(),
        "config_path": str(config.config_path), "config_hash": config_hash(config),
        "resolved_config": redacted_config(config), "exports": entries,
    }
    if len(entries) == 1:  # Rivet's one-export plan names its cursor here; apply checks it too
        doc["computed"] = {"cursor_snapshot": (entries[0].get("cursor_snapshot") or {}).get("value"),
                           "row_estimate": entries[0]["row_estimate"]}
    return json.loads(redact_secrets(json.dumps(doc, default=str)))


def write_plan(doc: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_plan(path: Path) -> dict[str, Any]:
    """Load and shape-check a plan file (ConfigError naming the problem)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read plan file '{path}': {exc.strerror or exc} — create it with "
                          f"`rivet plan -c rivet.yaml -o {path}`") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"plan file '{path}' is not a valid Rivet plan artifact (not JSON: {exc}).\n  "
                          "Hint: only files generated by `rivet plan` are accepted — re-run rivet plan") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ConfigError(f"plan file '{path}' is not a valid Rivet plan artifact: it is not a rivet plan (no "
                          f"\"kind\": \"{KIND}\").\n  Hint: only files generated by `rivet plan` are accepted")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(f"plan '{path}' has schema_version {doc.get('schema_version')!r}; this rivet "
                          f"reads version {SCHEMA_VERSION} — re-run rivet plan")
    for key in ("created_at", "config_path", "config_hash", "exports"):
        if key not in doc:
            raise ConfigError(f"plan '{path}' has no '{key}' — it is damaged; re-run rivet plan")
    return doc


@dataclass(frozen=True)
class Staleness:
    reason: str


def staleness(doc: dict[str, Any], config: RivetConfig, *, max_age: timedelta,
              now: datetime | None = None, recheck_windows: bool = True) -> list[Staleness]:
    """Every reason the plan no longer describes what would run (empty = fresh)."""
    from rivet_core.state import StateStore

    now = now or datetime.now(UTC)
    problems: list[Staleness] = []
    created = datetime.fromisoformat(doc["created_at"])
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    age = now - created
    if age > max_age:
        problems.append(Staleness(f"the plan is {_human(age)} old (max age {_human(max_age)})"))
    if config_hash(config) != doc["config_hash"]:
        problems.append(Staleness(f"the config {doc['config_path']} changed since the plan"))
        return problems  # exports may not even exist any more; nothing below is meaningful
    state = StateStore.open(config.config_path)
    try:
        for entry in doc["exports"]:
            export = config.export(entry["export_name"])
            planned = entry.get("cursor_snapshot", {}).get("value")
            current = state.get_cursor(export.name)
            computed = doc.get("computed")
            if isinstance(computed, dict) and len(doc["exports"]) == 1 and computed.get("cursor_snapshot") is not None:
                planned = str(computed["cursor_snapshot"])  # Rivet's field wins when both are there
            if planned != current:
                problems.append(Staleness(
                    f"export '{export.name}': the cursor has drifted since the plan (cursor moved {planned!r} -> "
                    f"{current!r}; another run exported rows)"))
    finally:
        state.close()
    if recheck_windows:
        problems.extend(_window_changes(doc, config))
    return problems


def _window_changes(doc: dict[str, Any], config: RivetConfig) -> list[Staleness]:
    chunked = [e for e in doc["exports"] if e.get("mode") == "chunked"]
    if not chunked:
        return []
    from rivet_core.source import open_source

    out = []
    exports = [config.export(e["export_name"]) for e in chunked]
    with open_source(config.source_url(), exports[0].resolved_tuning(config.source),
                     engine=config.source.type) as session:
        for entry, export in zip(chunked, exports, strict=True):
            now_windows = chunk_section(session, export)["windows"]
            if now_windows != entry.get("windows"):
                out.append(Staleness(
                    f"export '{export.name}': the chunk windows changed since the plan "
                    f"({len(entry.get('windows') or [])} -> {len(now_windows)} window(s); the "
                    "source changed)"))
    return out


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds >= 2 * 86400:  # Rivet's wording past two days
        return f"{seconds // 86400} days"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def parse_duration(text: str) -> timedelta:
    """`90`, `90s`, `30m`, `24h`, `2d` → timedelta (ConfigError otherwise)."""
    raw = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    unit = raw[-1] if raw and raw[-1] in units else "s"
    number = raw[:-1] if raw and raw[-1] in units else raw
    try:
        value = float(number)
    except ValueError:
        raise ConfigError(f"--max-age '{text}' is not a duration — use e.g. 0, 90s, 30m, 24h or 2d") from None
    if value < 0:
        raise ConfigError(f"--max-age '{text}' is negative — use 0 or more")
    return timedelta(seconds=value * units[unit])
