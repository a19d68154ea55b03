"""Where a `mode: cdc` export's datasets live under its prefix, for the readers of the
prefix (`rivet validate`): each captured table's stream (the prefix itself for `table:`,
`<table>/` for `tables:`) and, with `initial: snapshot`, its `snapshot/` beside it — each a
dataset with its own manifest and `_SUCCESS`, under its own export name (run.py)."""

from __future__ import annotations

from rivet_core.config import ExportConfig
from rivet_core.config.cdc_rules import captured_tables

SNAPSHOT_FOLDER = "snapshot"


def cdc_datasets(export: ExportConfig) -> list[tuple[str, str, str]]:
    """(sub-prefix, label, export name of its manifests) of every dataset of the export."""
    out = []
    for table in captured_tables(export):
        sub, name = ("", export.name) if export.tables is None else (f"{table}/", f"{export.name}.{table}")
        label = name if not sub else f"{export.name} [{table}]"
        out.append((sub, label, name))
        if export.cdc is not None and export.cdc.initial == "snapshot":
            out.append((f"{sub}{SNAPSHOT_FOLDER}/", f"{label} [{SNAPSHOT_FOLDER}]", f"{name}.{SNAPSHOT_FOLDER}"))
    return out
