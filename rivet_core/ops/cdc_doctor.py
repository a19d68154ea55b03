"""`rivet doctor` for `mode: cdc` exports on PostgreSQL: `wal_level`, and every logical slot
of the server with the WAL it retains and its lag (Rivet's doctor does the same).

A logical slot pins WAL until its consumer confirms: a slot whose export stopped running —
or another tool's abandoned slot — keeps WAL until the source disk fills. So each slot is a
line: the export's own (created by its first run), then every other logical slot. Above
`RETAINED_WAL_LIMIT` a slot is a failure naming the fix.
"""

from __future__ import annotations

from typing import Any

from rivet_core.ops.doctor_lines import Check

#: Retained WAL above which a slot fails the doctor (Rivet's threshold: 1 GiB).
RETAINED_WAL_LIMIT = 1 << 30


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 20):.1f} MiB"


def check_cdc(config: Any) -> list[Check]:
    """The CDC lines (none when no export is `mode: cdc` or the source is not PostgreSQL)."""
    exports = [e for e in config.exports if e.mode == "cdc"]
    from rivet_core.source.dialect import dialect_of

    if not exports or dialect_of(config.source.type).change_log != "slot":
        return []
    from rivet_core.config.cdc import CdcConfig
    from rivet_core.source.postgres.changes import slot_report
    from rivet_core.source.postgres.session import pg_connect

    try:
        conn = pg_connect(config.source.resolve_url(config.config_dir))
    except Exception as exc:  # error boundary: the source line already says why
        return [Check("cdc", False, f"cannot inspect replication slots: {exc}", "fix the source connection first")]
    try:
        conn.autocommit = True
        level = conn.execute("SHOW wal_level").fetchone()[0]  # type: ignore[index]
        checks = [Check("cdc wal_level", level == "logical", f"wal_level = {level}",
                        None if level == "logical" else "set wal_level = logical (ALTER SYSTEM SET wal_level = "
                        "logical) and restart PostgreSQL")]
        slots = {s["slot"]: s for s in slot_report(conn)}
    finally:
        conn.close()
    owned = {(e.cdc or CdcConfig()).resolved_slot: e.name for e in exports}
    for slot, export in owned.items():
        found = slots.get(slot)
        if found is None:
            checks.append(Check(f"cdc slot {slot}", True, f"export '{export}': not created yet (its first run creates it)"))
        else:
            checks.append(_slot_check(found, f"export '{export}'"))
    checks += [_slot_check(s, "not an export of this config") for name, s in slots.items() if name not in owned]
    return checks


def _slot_check(slot: dict[str, Any], whose: str) -> Check:
    retained = slot["retained_wal_bytes"]
    detail = (f"{whose}: retains {_mib(retained)} of WAL, lag {_mib(slot['lag_bytes'])}, "
              f"{'active' if slot['active'] else 'inactive'}, wal_status {slot['wal_status']}")
    if slot["wal_status"] == "lost":
        return Check(f"cdc slot {slot['slot']}", False, detail, "the slot lost its WAL: drop it, reset the export's "
                     "state and re-snapshot (cdc.initial: snapshot)")
    if retained is not None and retained > RETAINED_WAL_LIMIT:
        return Check(f"cdc slot {slot['slot']}", False, detail,
                     "run the export (each run advances its slot), or drop a slot nothing reads: "
                     f"SELECT pg_drop_replication_slot('{slot['slot']}')")
    return Check(f"cdc slot {slot['slot']}", True, detail)
