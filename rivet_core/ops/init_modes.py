"""`rivet init --mode M` and `rivet init --discover`: Rivet's two init flags that change what
is written, apart from the scaffold's rendering (scaffold.py).

- `--mode` forces one mode on every scaffolded export instead of the per-table suggestion
  (introspect/heuristics.py). A forced mode still needs its key: `incremental` a cursor
  candidate, `chunked` a chunk key, `time_window` a date/timestamp column. A table without one
  is refused naming the table and the fix, since writing the mode without its key would give
  a config that does not load. `cdc` is refused: this init scaffolds batch exports only.
- `--discover` writes Rivet's discovery artifact (JSON: per table the row estimate, the
  suggested mode, ranked cursor and chunk candidates, notes) instead of a YAML scaffold — the
  keys of Rivet's src/init/artifact.rs.
"""

from __future__ import annotations

from typing import Any

from rivet_core import __version__
from rivet_core.errors import ConfigError
from rivet_core.introspect.heuristics import Suggestion, chunk_size_for
from rivet_core.introspect.table_report import TableReport
from rivet_core.lazy_modules import pa

#: Rivet's `--mode` values (src/cli/dispatch.rs); `cdc` is refused here (module docstring).
MODES = ("full", "incremental", "chunked", "time_window", "cdc")


def check_mode(mode: str | None) -> None:
    """Rivet's refusal of an unknown `--mode`, and ours of `cdc`."""
    if mode is None:
        return
    if mode not in MODES:
        raise ConfigError(f'--mode must be one of: {", ".join(MODES)} (got "{mode}")')
    if mode == "cdc":
        raise ConfigError("--mode cdc: `rivet init` scaffolds batch exports only (full, incremental, chunked, "
                          "time_window) — scaffold one of those, then write the CDC export by hand")


def _temporal(report: TableReport) -> list[str]:
    return [c for c in report.cursor_candidates
            if (col := report.column(c)) is not None and col.arrow_type is not None
            and (pa.types.is_timestamp(col.arrow_type) or pa.types.is_date(col.arrow_type))]


def _refuse(report: TableReport, mode: str, needs: str) -> ConfigError:
    return ConfigError(f"--mode {mode}: table '{report.name}' has no {needs} — drop --mode to take the "
                       "suggested mode per table, or scaffold this table with another --table/--exclude")


def forced(report: TableReport, mode: str, suggested: Suggestion, chunk_size: int | None) -> Suggestion:
    """The suggestion for `report` when `--mode mode` is forced (module docstring)."""
    why = f"--mode {mode} (suggested: {suggested.mode} — {suggested.reason})"
    base = {"overrides": suggested.overrides, "review": list(suggested.review)}
    if mode == suggested.mode:
        return suggested
    if mode == "full":
        return Suggestion("full", reason=why, **base)
    if mode == "incremental":
        if not report.cursor_candidates:
            raise _refuse(report, mode, "cursor candidate (a date/timestamp or increasing column)")
        return Suggestion("incremental", {"cursor_column": report.cursor_candidates[0]}, reason=why, **base)
    if mode == "time_window":
        temporal = _temporal(report)
        if not temporal:
            raise _refuse(report, mode, "date or timestamp column")
        return Suggestion("time_window", {"time_column": temporal[0], "days_window": 7}, reason=why,
                          overrides=suggested.overrides,
                          review=[*suggested.review, "days_window: 7 is a default — set the days each run re-reads"])
    key = report.integer_pk
    size = chunk_size or chunk_size_for(report.row_estimate or 0)
    if key:
        return Suggestion("chunked", {"chunk_column": key, "chunk_size": size, "chunk_checkpoint": True},
                          reason=why, **base)
    if len(report.primary_key) == 1:
        return Suggestion("chunked", {"chunk_by_key": report.primary_key[0], "chunk_size": size,
                                      "chunk_checkpoint": True}, reason=why, **base)
    raise _refuse(report, mode, "single-column primary key to chunk by")


def _cursor_candidates(report: TableReport) -> list[dict[str, Any]]:
    out = []
    for rank, name in enumerate(report.cursor_candidates):
        col = report.column(name)
        if col is None:
            continue
        reasons = []
        lowered = name.lower()
        if "updated" in lowered or "modified" in lowered:
            reasons.append("name_suggests_updated")
        elif "created" in lowered:
            reasons.append("name_suggests_created")
        if col.arrow_type is not None and (pa.types.is_timestamp(col.arrow_type) or pa.types.is_date(col.arrow_type)):
            reasons.append("timestamp_type")
        elif col.arrow_type is not None and pa.types.is_integer(col.arrow_type):
            reasons.append("integer_monotonic")
        if name in report.primary_key:
            reasons.append("primary_key")
        if name not in report.not_null:
            reasons.append("nullable")
        out.append({"column": col.name, "data_type": col.source_type, "is_nullable": name not in report.not_null,
                    "is_primary_key": name in report.primary_key, "score": 100 - 10 * rank, "reasons": reasons})
    return out


def _chunk_candidates(report: TableReport) -> list[dict[str, Any]]:
    out = []
    for col in report.columns:
        if col.arrow_type is None or not pa.types.is_integer(col.arrow_type):
            continue
        pk = col.name in report.primary_key
        out.append({"column": col.name, "data_type": col.source_type, "is_primary_key": pk,
                    "score": (50 if pk else 0) + (30 if report.is_indexed(col.name) else 0)
                    + (20 if col.name in report.not_null else 0)})
    return sorted(out, key=lambda c: -c["score"])


def table_discovery(report: TableReport, suggestion: Suggestion, *, default_schema: str) -> dict[str, Any]:
    """One table of the discovery artifact (Rivet's `TableDiscovery`)."""
    row = {"schema": report.schema or default_schema, "table": report.name, "row_estimate": report.row_estimate or 0}
    if report.row_estimate is not None and report.avg_row_bytes is not None:
        row["total_bytes"] = int(report.row_estimate * report.avg_row_bytes)
    return {**row, "suggested_mode": suggestion.mode, "cursor_candidates": _cursor_candidates(report),
            "chunk_candidates": _chunk_candidates(report), "notes": [suggestion.reason, *suggestion.review]}


def discovery_artifact(engine: str, scope: str, tables: list[dict[str, Any]], tls_mode: str | None = None
                       ) -> dict[str, Any]:
    """Rivet's `DiscoveryArtifact` (`tls_mode` only when `--tls` set it, as Rivet's)."""
    return {"rivet_version": __version__, "source_type": engine, "scope": scope,
            **({"tls_mode": tls_mode} if tls_mode else {}), "tables": tables}


__all__ = ["MODES", "check_mode", "discovery_artifact", "forced", "table_discovery"]
