"""Engine probes of source pressure for the governor (rivet_core/pipeline/governor.py).

Each probe is its own short-lived side connection, autocommit, with a 2 s statement timeout:
the export's connection holds a REPEATABLE READ snapshot (PostgreSQL) or a consistent-snapshot
transaction (MySQL) that a probe query must never join, extend or break. One probe per export
read, opened at the first sample and closed with the read; a sample is one or two catalog
queries, taken at most once a second (the governor's interval).

What is counted, and why it is scoped to the export's database:
- **PostgreSQL**: `pg_stat_activity` rows of the current database that are `active` client
  backends, minus the export's own backend and the probe's (`waiting`: those among them
  waiting on a lock, a lightweight lock, I/O or a buffer pin); on a replica
  (`pg_is_in_recovery()`) the replay lag `now() - pg_last_xact_replay_timestamp()`, taken as
  0 when everything received is replayed (an idle primary does not make a replica "late").
  Without `pg_read_all_stats` other roles' sessions show no `state` and are not counted; the
  governor then leans on its latency signal.
- **MySQL/MariaDB**: `information_schema.PROCESSLIST` threads of the current database that are
  not idle (`Sleep`), minus the export's and the probe's; `Threads_running` (SHOW GLOBAL STATUS)
  is recorded as well. It is server-wide, so it is not what the decision reads: the sessions an
  export slows down are its database's application, and a shared server's other databases
  (or other tenants' batch jobs) would otherwise throttle an export whose application is idle.
  Without the PROCESS privilege only the user's own threads are visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class PressureSample:
    """One look at the source. None = the signal is not available on this engine/server.

    `active`: other sessions of the export's database running a statement right now (the
    export's own connection and the probe's excluded). `waiting`: those of them waiting on a
    lock or I/O (PostgreSQL). `threads_running`: MySQL/MariaDB `Threads_running`, server-wide
    (recorded; the decision uses the per-database `active`, see the module doc).
    `replica_lag_s`: replay lag when the source is a replica. `latency_ratio`: the governor's
    own seconds per row over the run's baseline (filled in by the loop)."""

    active: int | None = None
    waiting: int | None = None
    threads_running: int | None = None
    replica_lag_s: float | None = None
    latency_ratio: float | None = None


class PressureProbe(Protocol):
    """A side connection that reads the source's load."""

    def sample(self) -> PressureSample: ...

    def close(self) -> None: ...


_PROBE_TIMEOUT_S = 2

_PG_SQL = """
SELECT count(*) FILTER (WHERE state = 'active'),
       count(*) FILTER (WHERE state = 'active'
                        AND wait_event_type IN ('Lock', 'LWLock', 'IO', 'BufferPin')),
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

    def __init__(self, url: str, export_pid: int) -> None:
        from rivet_core.source.postgres.session import pg_connect

        self._export_pid = export_pid
        self._conn = pg_connect(url)
        self._conn.autocommit = True
        self._conn.execute(f"SET statement_timeout = {_PROBE_TIMEOUT_S * 1000}")

    def sample(self) -> PressureSample:
        row = self._conn.execute(_PG_SQL, (self._export_pid,)).fetchone()
        assert row is not None  # an aggregate always returns one row
        active, waiting, _, lag = row
        return PressureSample(active=int(active), waiting=int(waiting),
                              replica_lag_s=None if lag is None else round(float(lag), 3))

    def close(self) -> None:
        self._conn.close()


_MYSQL_SQL = """
SELECT COUNT(*), COALESCE(SUM(STATE LIKE '%%lock%%'), 0)
FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND COMMAND NOT IN ('Sleep', 'Daemon', 'Binlog Dump', 'Killed')
  AND ID <> CONNECTION_ID() AND ID <> %s
"""


class MySQLPressureProbe:
    """See module doc. `export_thread`: the export connection's thread id (not counted)."""

    def __init__(self, url: str, export_thread: int, is_mariadb: bool) -> None:
        from rivet_core.source.mysql.session import mysql_connect

        self._export_thread = export_thread
        self._conn: Any = mysql_connect(url)
        with self._conn.cursor() as cur:
            if is_mariadb:
                cur.execute(f"SET SESSION max_statement_time = {_PROBE_TIMEOUT_S}")
            else:
                cur.execute(f"SET SESSION max_execution_time = {_PROBE_TIMEOUT_S * 1000}")

    def sample(self) -> PressureSample:
        with self._conn.cursor() as cur:
            cur.execute(_MYSQL_SQL, (self._export_thread,))
            active, waiting = cur.fetchone()
            cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_running'")
            row = cur.fetchone()
        return PressureSample(active=int(active), waiting=int(waiting),
                              threads_running=int(row[1]) if row else None)

    def close(self) -> None:
        self._conn.close()
