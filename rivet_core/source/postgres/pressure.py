"""PostgreSQL pressure probe for the governor (rivet_core/source/pressure.py).

What is counted:
- **PostgreSQL**: `pg_stat_activity` rows of the current database that are `active` client
  backends, minus the export's own backend and the probe's (`waiting`: those among them
  waiting on a lock, a lightweight lock, I/O or a buffer pin; `recent`: client backends
  whose state changed within the last second — active now, or idle for less than a second,
  i.e. clients issuing statements back to back); on a replica
  (`pg_is_in_recovery()`) the replay lag `now() - pg_last_xact_replay_timestamp()`, taken as
  0 when everything received is replayed (an idle primary does not make a replica "late").
  Without `pg_read_all_stats` other roles' sessions show no `state` and are not counted; the
  governor then leans on its latency signal.

The probe owns its side connection (autocommit, 2 s statement timeout), opened by the session
(`PostgresSession.pressure_probe`): the export's connection holds the snapshot transaction a
probe query must never join.
"""

from __future__ import annotations

from typing import Any

from rivet_core.source.pressure import PROBE_TIMEOUT_S, PressureSample

_PG_SQL = """
SELECT count(*) FILTER (WHERE state = 'active'),
       count(*) FILTER (WHERE state = 'active'
                        AND wait_event_type IN ('Lock', 'LWLock', 'IO', 'BufferPin')),
       count(*) FILTER (WHERE state = 'active'
                        OR state_change > clock_timestamp() - interval '1 second'),
       pg_is_in_recovery(),
       CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() IS NOT NULL
                 AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END
FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid() AND pid <> %s
"""


class PgPressureProbe:
    """See module doc. `export_pid`: the export connection's backend (not counted)."""

    def __init__(self, conn: Any, export_pid: int) -> None:
        self._export_pid = export_pid
        self._conn = conn
        self._conn.autocommit = True
        self._conn.execute(f"SET statement_timeout = {PROBE_TIMEOUT_S * 1000}")

    def sample(self) -> PressureSample:
        row = self._conn.execute(_PG_SQL, (self._export_pid,)).fetchone()
        assert row is not None  # an aggregate always returns one row
        active, waiting, recent, _, lag = row
        return PressureSample(active=int(active), waiting=int(waiting), recent=int(recent),
                              replica_lag_s=None if lag is None else round(float(lag), 3))

    def close(self) -> None:
        self._conn.close()
