"""How far a MySQL/MariaDB CDC export's published stream is behind the binlog, in bytes.

PostgreSQL reports a slot's lag itself (`api.cdc_slots`); a binlog has no consumer marker
(rivet_core/source/mysql/changes.py `confirm`), so the lag is computed from the published
position (the latest manifest's `cursor_high`) and `SHOW BINARY LOGS`: the rest of the
published file plus every later file. It is what the next run would read (captured tables
or not), and what the server must keep (`binlog_expire_logs_seconds`) for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rivet_core.source.changes import ChangePosition


def binlog_bytes_after(logs: Sequence[tuple[str, int]], position: ChangePosition) -> int | None:
    """Bytes of binlog after `position`, given `SHOW BINARY LOGS` rows (name, size) in
    server order; None when the position's file is no longer listed (purged: the lag is
    unknowable, and the next run refuses it)."""
    names = [name for name, _size in logs]
    file = str(position.fields.get("file"))
    if file not in names:
        return None
    at = names.index(file)
    rest = max(int(logs[at][1]) - int(position.fields["pos"]), 0)
    return rest + sum(int(size) for _name, size in logs[at + 1:])
