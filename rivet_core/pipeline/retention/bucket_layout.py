"""Where a `partition_by` export's buckets live: the root prefix (the destination cut at
`{partition}`), what follows the token, and the bucket folders a run published there.

Asked by the partitioned run (pipeline/buckets/run.py), `rivet validate`, `rivet gc` (pipeline/retention/gc.py)
and the API — kept apart from the run itself so that gc, which the run's finalize calls,
can find the buckets without importing the runner.
"""

from __future__ import annotations

import re

from rivet_core.config import ExportConfig, RivetConfig

TOKEN = "{partition}"

#: Hive's label for rows whose partition value is NULL (Spark, Hive, DuckDB and pyarrow
#: read it back as NULL), so those rows stay in the dataset instead of being dropped.
HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def root_export(export: ExportConfig) -> ExportConfig:
    """The export with its destination cut just before `{partition}`: the prefix every
    bucket lives under (what `rivet validate` lists); the remainder after the token is
    `token_suffix`."""
    dest = export.destination
    update = {f: getattr(dest, f).split(TOKEN, 1)[0] for f in ("path", "prefix")
              if getattr(dest, f) and TOKEN in getattr(dest, f)}
    return export.model_copy(update={"destination": dest.model_copy(update=update)})


def token_suffix(export: ExportConfig) -> str:
    """What follows `{partition}` in the destination (`/` stripped at the front), e.g.
    `parquet/` for `prefix: orders/{partition}/parquet/`; '' when the token ends it."""
    dest = export.destination
    for text in (dest.prefix, dest.path):
        if text and TOKEN in text:
            rest = text.split(TOKEN, 1)[1].lstrip("/")
            return rest if not rest or rest.endswith("/") else rest + "/"
    return ""


def bucket_prefixes(config: RivetConfig, export: ExportConfig) -> list[str]:
    """Every `<col>=<label>/<suffix>` sub-prefix under the export's root that holds a
    `manifest.json` (the buckets some run published), sorted. [] for other exports."""
    from rivet_core.unit.resolve import export_destination

    if not export.partition_by:
        return []
    suffix = token_suffix(export)
    pattern = re.compile(rf"^({re.escape(export.partition_by)}=[^/]+)/{re.escape(suffix)}manifest\.json$")
    found = set()
    for obj in export_destination(config, root_export(export), create=False).list(""):
        match = pattern.match(obj.key)
        if match:
            found.add(f"{match[1]}/{suffix}")
    return sorted(found)


def bucket_targets(export: ExportConfig, prefixes: list[str]) -> list[tuple[str, str, str]]:
    """(sub-prefix, display label, the bucket's sub-export name) for each bucket prefix: the
    manifest under `<col>=<label>/` was written by `<export>__<label>` (`__null` for NULLs),
    so verification expects that name there."""
    out = []
    for prefix in prefixes:
        label = prefix.split("/", 1)[0].split("=", 1)[1]
        suffix = "null" if label == HIVE_NULL_PARTITION else label
        out.append((prefix, f"{export.name} [{prefix.rstrip('/')}]", f"{export.name}__{suffix}"))
    return out


__all__ = ["TOKEN", "bucket_prefixes", "bucket_targets", "root_export", "token_suffix"]
