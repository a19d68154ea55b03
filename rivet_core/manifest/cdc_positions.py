"""Depth `full` of a `mode: cdc` prefix: the `__pos` column read back against the manifests.

What it proves (Rivet's `__pos` continuity check, made stronger by the run chain our
manifests carry): within each run, `__pos` never goes backwards in part → row order (every
change stayed in log order, no part reordered); every row of a run lies inside the run's
`(cursor_low, cursor_high]` range; and each run's `cursor_low` is the previous run's
`cursor_high` — the runs tile the log with no gap and no overlap between published runs.
What it cannot prove: that no transaction inside a range is missing (positions are byte
offsets, not a dense counter). Each finding is a `cdc_position_violation`
(CdcPositionViolation, exit 3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from rivet_core.destination import Destination
from rivet_core.manifest.model import Manifest

_ORDINAL = re.compile(r"\.(\d+)$")
KIND = "cdc_position_violation"


def position_key(text: str) -> tuple[int, ...]:
    """A `__pos` JSON text as an ordered key (PostgreSQL LSN; binlog file ordinal + offset)."""
    fields = json.loads(text)
    if "lsn" in fields:
        high, sep, low = str(fields["lsn"]).partition("/")
        if not sep:
            raise ValueError("lsn is not X/Y")
        return ((int(high, 16) << 32) | int(low, 16),)
    match = _ORDINAL.search(str(fields.get("file", "")))
    if match is None or "pos" not in fields:
        raise ValueError("neither lsn nor file/pos")
    return (int(match.group(1)), int(fields["pos"]))


def _positions(dest: Destination, manifest: Manifest) -> Iterator[tuple[str, str]]:
    """(part path, `__pos`) in part → row order."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    for part in manifest.committed_parts:
        data = dest.read_bytes(part.path)
        if manifest.format == "parquet" or part.path.endswith(".parquet"):
            table = pq.read_table(pa.BufferReader(data), columns=["__pos"])
        else:
            table = pacsv.read_csv(pa.BufferReader(data), convert_options=pacsv.ConvertOptions(
                include_columns=["__pos"], column_types={"__pos": pa.string()}))
        for value in table.column("__pos").to_pylist():
            yield part.path, value


def _finding(run: Manifest, detail: str) -> tuple[str, dict[str, Any]]:
    return KIND, {"run_id": run.run_id, "detail": f"CdcPositionViolation: run {run.run_id}: {detail}"}


def _range(run: Manifest) -> tuple[str | None, str | None]:
    e = run.source.extraction
    return (None, None) if e is None else (e.cursor_low, e.cursor_high)  # type: ignore[return-value]


def check_run(dest: Destination, run: Manifest) -> list[tuple[str, dict[str, Any]]]:
    """One run: `__pos` parses, never goes backwards, and stays inside the run's range."""
    low, high = _range(run)
    findings: list[tuple[str, dict[str, Any]]] = []
    try:
        low_key = position_key(low) if low else None
        high_key = position_key(high) if high else None
    except (ValueError, TypeError) as exc:
        return [_finding(run, f"the manifest's position range ({low!r}, {high!r}) does not parse: {exc}")]
    previous: tuple[int, ...] | None = None
    for path, text in _positions(dest, run):
        try:
            key = position_key(text)
        except (ValueError, TypeError) as exc:
            findings.append(_finding(run, f"part '{path}': unparseable __pos {text!r} ({exc})"))
            continue
        if previous is not None and key < previous:
            findings.append(_finding(run, f"part '{path}': __pos went backwards at {text} (out of log order)"))
        if (low_key is not None and key <= low_key) or (high_key is not None and key > high_key):
            findings.append(_finding(run, f"part '{path}': __pos {text} is outside the run's range ({low}, {high}]"))
        previous = key
        if len(findings) >= 20:
            break
    return findings


def check_chain(runs: Sequence[Manifest]) -> list[tuple[str, dict[str, Any]]]:
    """Consecutive published runs (ledger order): each starts where the previous ended."""
    findings = []
    for before, after in zip(runs, runs[1:], strict=False):
        if _range(after)[0] != _range(before)[1]:
            findings.append(_finding(after, f"starts after {_range(after)[0]}, but the previous run "
                                            f"{before.run_id} ended at {_range(before)[1]} — a gap or an "
                                            "overlap between published runs"))
    return findings
