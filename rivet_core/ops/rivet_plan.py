"""`rivet apply` on a plan file made by Rivet itself (`rivet plan --format json -o`), so a
Rivet user's saved plans keep working (issue 35; docs/rivet-compat.md "Rivet's CLI matrix").

Rivet's artifact describes one export: `export_name`, `created_at`, `config_path`,
`resolved_plan` (the base query, strategy, format, compression, destination and source
blocks in Rivet's field names) and `computed.cursor_snapshot`. Applying it follows Rivet's
rules: older than 24 h is refused without `--force` ("N days old"), a cursor that moved since
the snapshot is refused without `--force` ("cursor has drifted"); the config it names is used
when it still exists, else — Rivet's fallback — the plan is replayed on its own: the export is
rebuilt from `resolved_plan` into `<plan>.rivet.yaml` beside the plan file, whose directory
then holds the state store (as Rivet opens its state next to the plan file), and a relative
local destination path is taken from the current directory, as Rivet's is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from rivet_core.errors import ConfigError

#: Rivet refuses a plan this old without --force (its apply: 24 h).
MAX_AGE = timedelta(hours=24)
_SOURCE_KEYS = ("type", "url", "url_env", "url_file", "host", "port", "user", "password_env", "database")
_MODES = {"Snapshot": "full"}


def is_rivet_artifact(doc: Any) -> bool:
    """A plan Rivet wrote (ours carry `kind: rivet.plan`)."""
    return isinstance(doc, dict) and "kind" not in doc and isinstance(doc.get("resolved_plan"), dict) \
        and "export_name" in doc


def problems(doc: dict[str, Any], cursor: str | None, *, now: datetime | None = None) -> list[str]:
    """Why Rivet would refuse this plan without --force (empty: fresh)."""
    now = now or datetime.now(UTC)
    out = []
    created = datetime.fromisoformat(str(doc.get("created_at", "")).replace("Z", "+00:00"))
    age = now - (created if created.tzinfo else created.replace(tzinfo=UTC))
    if age > MAX_AGE:
        phrase = (f"{age.days} days old (created {created:%Y-%m-%d})" if age >= timedelta(hours=48)
                  else f"{int(age.total_seconds() // 3600)} hours old")
        out.append(f"plan '{doc['export_name']}' is {phrase} (limit: 24 h)")
    snapshot = (doc.get("computed") or {}).get("cursor_snapshot")
    if snapshot is not None and str(snapshot) != (cursor or ""):
        out.append(f"plan '{doc['export_name']}': cursor has drifted since plan was generated (plan snapshot: "
                   f"{snapshot!r}, current: {cursor!r})")
    return out


def config_for(doc: dict[str, Any], plan_file: Path) -> Path:
    """The config to run the plan with: the one it names if it exists, else one rebuilt from
    `resolved_plan` beside the plan file (module docstring)."""
    named = doc.get("config_path")
    if named and Path(named).is_file():
        return Path(named)
    plan = doc["resolved_plan"]
    mode = _MODES.get(str(plan.get("strategy")))
    if mode is None:
        raise ConfigError(f"plan file '{plan_file}': its config {named!r} is gone and a Rivet plan of strategy "
                          f"{plan.get('strategy')!r} cannot be replayed on its own here (only full snapshots) — "
                          "restore the config, or make a new plan with `rivet plan`")
    source = {k: v for k, v in (plan.get("source") or {}).items() if k in _SOURCE_KEYS and v is not None}
    destination = {k: v for k, v in (plan.get("destination") or {}).items()
                   if v is not None and v is not False}
    if destination.get("type") == "local" and not Path(str(destination.get("path", ""))).is_absolute():
        destination["path"] = str(Path.cwd() / str(destination.get("path", "")))
    export = {"name": doc["export_name"], "query": plan["base_query"], "mode": mode,
              "format": plan.get("format") or "parquet", "destination": destination}
    if plan.get("compression"):
        export["compression"] = plan["compression"]
    target = plan_file.with_name(f"{plan_file.stem}.rivet.yaml")
    target.write_text("# Rebuilt by `rivet apply` from the Rivet plan " + plan_file.name + "\n"
                      + yaml.safe_dump({"source": source, "exports": [export]}, sort_keys=False), encoding="utf-8")
    return target
