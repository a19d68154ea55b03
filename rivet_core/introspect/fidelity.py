"""Type fidelity: how faithfully a source column survives the trip to Arrow.

The mapping itself is the engine's (`rivet_core/source/<engine>/types.py`); this module only grades
its outcome, because a reviewer needs to know which columns to look at:

- `exact`: every source value has exactly one Arrow value and back (ints, decimals with
  their catalog precision, timestamps at µs, text, json, uuid, …).
- `lossy`: the export will run but may not preserve every value — a `columns:` override
  replaces a mapping the engine could not derive (an unbounded PostgreSQL `numeric` forced
  to `decimal(38,18)` rounds digits beyond scale 18 and refuses values beyond precision),
  an override narrows the native type, SQLite had to guess an undeclared column's type
  from sampled values, or a SQLite declared type only gives NUMERIC affinity (bare
  `NUMERIC` → float64, `UUID` → string: see rivet_core/source/sqlite/types.py for why each
  is not exact; the engine's dialect gives the note, `SourceDialect.type_note`).
- `unsupported`: no mapping and no override — `rivet run` fails before writing anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from rivet_core.source.base import SourceColumn
from rivet_core.source.dialect import SourceDialect

EXACT, LOSSY, UNSUPPORTED = "exact", "lossy", "unsupported"


@dataclass(frozen=True)
class ColumnReport:
    name: str
    source_type: str
    arrow_type: pa.DataType | None
    fidelity: str
    note: str = ""
    overridden: bool = False
    indexed: bool = False

    @property
    def arrow_text(self) -> str:
        return "-" if self.arrow_type is None else arrow_type_text(self.arrow_type)

    def to_dict(self) -> dict[str, object]:
        return {"column": self.name, "source_type": self.source_type, "arrow_type": self.arrow_text,
                "fidelity": self.fidelity, "note": self.note, "override": self.overridden,
                "indexed": self.indexed}


def arrow_type_text(arrow_type: pa.DataType) -> str:
    """Readable Arrow type; extension types by their extension name (`arrow.uuid`)."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        return arrow_type.extension_name
    return str(arrow_type)


def grade(dialect: SourceDialect, column: SourceColumn, override: pa.DataType | None) -> tuple[str, str]:
    """(fidelity, note) of one column given its `columns:` override (if any)."""
    if override is not None:
        if column.arrow_type is None:
            return LOSSY, (f"override {arrow_type_text(override)} stands in for unmappable "
                           f"{column.native_type}: values beyond its precision/scale do not fit")
        if override != column.arrow_type:
            return LOSSY, (f"override {arrow_type_text(override)} differs from the native mapping "
                           f"{arrow_type_text(column.arrow_type)} — values may not round-trip")
        return EXACT, "override matches the native mapping"
    if column.arrow_type is None:
        return UNSUPPORTED, column.unsupported_reason or "no Arrow mapping"
    note = dialect.type_note(column.native_type)
    if note is not None:
        return LOSSY, note
    return EXACT, ""


def column_reports(dialect: SourceDialect, columns: list[SourceColumn], overrides: Mapping[str, pa.DataType],
                   indexed: set[str] | frozenset[str] = frozenset()) -> list[ColumnReport]:
    """Grade every probed column (overrides are matched by bare column name)."""
    out = []
    for column in columns:
        override = overrides.get(column.name)
        fidelity, note = grade(dialect, column, override)
        out.append(ColumnReport(
            name=column.name, source_type=column.native_type,
            arrow_type=override if override is not None else column.arrow_type,
            fidelity=fidelity, note=note, overridden=override is not None,
            indexed=column.name in indexed,
        ))
    return out
