"""Refuse to start an export against a state store it cannot write.

Why: every write a run makes to the state store after publishing is advisory (file_log,
journal, metrics) or warn-on-fail (the cursor after the manifest landed — docs/invariants.md I7 and
the amendment there). That is right for a store that fails *once*, mid-run. A store that
is read-only from the start (a `chattr +i`/read-only-mounted SQLite file, a PostgreSQL role
with SELECT only) would instead make every run publish data and a `_SUCCESS`, report
success, and never move the cursor: each run re-exports the same rows, silently. So a run
probes the store *before* it reads the source, and fails with one clear message when it
cannot write the cursor.

The probe is a no-op `UPDATE … WHERE 1 = 0` on `export_state` — the cursor, the one write
whose silent loss changes what the next run exports. The file log and metrics stay advisory
(I7, I4): a store that refuses only those still lets the run publish, with warnings.
On SQLite the probe opens a write transaction (`BEGIN IMMEDIATE`, database.py), which a
read-only file refuses; PostgreSQL checks table privileges at executor start whatever the
row count. A lock held by another process makes SQLite wait its busy timeout and then
answer "database is locked" — a retryable condition, reported as `TransientError` (exit 2).
"""

from __future__ import annotations

from rivet_core.errors import ConfigError, RivetError, TransientError
from rivet_core.redact import redact_secrets
from rivet_core.state.database import StateDatabase

#: The tables whose writes decide whether a run's outcome is recorded at all.
_PROBED = ("export_state",)


def _diagnose(url: str, cause: str) -> RivetError:
    text = cause.lower()
    sqlite = url.startswith("sqlite")
    if "locked" in text or "busy" in text:
        return TransientError(
            f"the state store {url} is locked by another process ({cause}) — a running rivet or "
            f"a tool holding a transaction on it; retry when it has finished (nothing was exported)")
    if sqlite:
        fix = ("make the state file, its -wal/-shm files and their directory writable "
               "(read-only mount, `chattr +i` or file mode), or point RIVET_STATE_URL elsewhere")
    else:
        fix = ("grant the RIVET_STATE_URL role SELECT, INSERT, UPDATE and DELETE on the rivet "
               "state tables, or use a role that has them")
    return ConfigError(
        f"the state store {url} is not writable ({cause}) — an export would publish data but "
        f"could not record its cursor; {fix} (nothing was exported)")


def assert_writable(database: StateDatabase, url: str) -> None:
    """Raise ConfigError (read-only / no privilege) or TransientError (locked) unless a run
    can write the state tables; see the module docstring. `url` must already be redacted."""
    try:
        with database.transaction() as tx:
            for table in _PROBED:
                tx.execute(f"UPDATE {table} SET export_name = export_name WHERE 1 = 0")
    except database.Error as exc:
        cause = redact_secrets(str(exc).strip().splitlines()[0])
        raise _diagnose(url, cause) from exc
