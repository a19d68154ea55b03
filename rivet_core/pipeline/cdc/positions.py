"""`__pos` values as ordered keys, and where a CDC table's published stream ends.

`__pos` is JSON text (rivet_core/source/changes.py `ChangePosition.to_json`): `{"lsn": "X/Y"}`
(PostgreSQL) or `{"file": "mysql-bin.000003", "pos": 1234}` (binlog). The run and
`rivet validate` compare positions without the reader that wrote them, so the parsing is
here, engine-agnostic: an LSN as one integer, a binlog coordinate as (file ordinal, offset)
— the ordinal, not the file name, since a name compares wrongly once its number gains a
digit.
"""

from __future__ import annotations

import json
import re

from rivet_core.destination import Destination
from rivet_core.errors import DataIntegrityError
from rivet_core.manifest import read_manifest
from rivet_core.source.changes import ChangePosition
from rivet_core.state import StateStore

_ORDINAL = re.compile(r"\.(\d+)$")


def parse_position(text: str) -> ChangePosition:
    """A `__pos` text as a `ChangePosition`; ValueError when it is neither shape."""
    fields = json.loads(text)
    if not isinstance(fields, dict):
        raise ValueError(f"__pos {text!r} is not a JSON object")
    if "lsn" in fields:
        high, sep, low = str(fields["lsn"]).partition("/")
        if not sep:
            raise ValueError(f"__pos {text!r}: lsn is not X/Y")
        return ChangePosition(((int(high, 16) << 32) | int(low, 16),), fields)
    if "file" in fields and "pos" in fields:
        match = _ORDINAL.search(str(fields["file"]))
        if match is None:
            raise ValueError(f"__pos {text!r}: binlog file has no numeric suffix")
        return ChangePosition((int(match.group(1)), int(fields["pos"])), fields)
    raise ValueError(f"__pos {text!r} has neither lsn nor file/pos")


def published_position(state: StateStore, export_name: str, dest: Destination) -> ChangePosition | None:
    """Where this table's published stream ends: the state store's cursor (committed right
    after `_SUCCESS`), else — a lost or reset store — the destination manifest's
    `cursor_high`, so a lost state store never re-publishes what the prefix already holds."""
    stored = state.get_cursor(export_name)
    if stored is None and dest.supports_manifest:
        found = read_manifest(dest)
        manifest = found[0] if found else None
        extraction = manifest.source.extraction if manifest is not None else None
        if manifest is not None and manifest.mode == "cdc" and manifest.status == "success" and extraction:
            stored = str(extraction.cursor_high) if extraction.cursor_high is not None else None
    if stored is None:
        return None
    try:
        return parse_position(stored)
    except (ValueError, TypeError) as exc:
        raise DataIntegrityError(
            f"export '{export_name}': the published CDC position {stored!r} cannot be read ({exc}) — "
            f"reset the export's state (rivet state reset) and re-snapshot") from None
