"""MySQL/MariaDB pressure probe for the governor (rivet_core/source/pressure.py).

What is counted:
- **MySQL/MariaDB**: `information_schema.PROCESSLIST` threads of the current database that are
  not idle (`Sleep`), minus the export's and the probe's (`recent`: those plus the idle ones
  whose `TIME` — seconds in their current state — is 0, i.e. clients issuing statements back
  to back); `Threads_running` (SHOW GLOBAL STATUS)
  is recorded as well. It is server-wide, so it is not what the decision reads: the sessions an
  export slows down are its database's application, and a shared server's other databases
  (or other tenants' batch jobs) would otherwise throttle an export whose application is idle.
  Without the PROCESS privilege only the user's own threads are visible.

The probe owns its side connection (2 s statement timeout), opened by the session
(`MySQLSession.pressure_probe`): the export's connection holds the consistent-snapshot
transaction a probe query must never join.
"""

from __future__ import annotations

from typing import Any

from rivet_core.source.pressure import PROBE_TIMEOUT_S, PressureSample

_MYSQL_SQL = """
SELECT COALESCE(SUM(COMMAND <> 'Sleep'), 0),
       COALESCE(SUM(COMMAND <> 'Sleep' AND STATE LIKE '%%lock%%'), 0),
       COUNT(*)
FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Killed')
  AND (COMMAND <> 'Sleep' OR TIME = 0)
  AND ID <> CONNECTION_ID() AND ID <> %s
"""


class MySQLPressureProbe:
    """See module doc. `export_thread`: the export connection's thread id (not counted)."""

    def __init__(self, conn: Any, export_thread: int, is_mariadb: bool) -> None:
        self._export_thread = export_thread
        self._conn = conn
        with self._conn.cursor() as cur:
            if is_mariadb:
                cur.execute(f"SET SESSION max_statement_time = {PROBE_TIMEOUT_S}")
            else:
                cur.execute(f"SET SESSION max_execution_time = {PROBE_TIMEOUT_S * 1000}")

    def sample(self) -> PressureSample:
        with self._conn.cursor() as cur:
            cur.execute(_MYSQL_SQL, (self._export_thread,))
            active, waiting, recent = cur.fetchone()
            cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_running'")
            row = cur.fetchone()
        return PressureSample(active=int(active), waiting=int(waiting), recent=int(recent),
                              threads_running=int(row[1]) if row else None)

    def close(self) -> None:
        self._conn.close()
