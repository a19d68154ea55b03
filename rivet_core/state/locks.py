"""export_lock: who is running an export right now: never two cursors racing.

A run of an export holds a row here from before it reads the cursor until its finalize is
done. Two modes:

- ``exclusive`` — a CLI run (full, incremental, time_window, a CLI chunked run) and one
  orchestrated time partition. Refused while any live holder of the same lock key exists.
- ``shared`` — the chunk-task flow (pipeline/chunked/tasks.py: planning, each window batch,
  the finalize): many workers on one export at once *by design*, so they
  do not exclude each other, but they are refused while an exclusive holder is live, and
  an exclusive run is refused while any of them is live. A full/incremental run racing a
  chunked run of the same export is therefore refused, whichever starts second.

The lock key is the export name, or ``<export>@<window label>`` for one time partition (the
partitions of a time-partitioned export are separate prefixes with no cursor between them).

Acquisition is ONE transaction that serializes acquirers of the key — SQLite's
``BEGIN IMMEDIATE`` (database.py), PostgreSQL's ``pg_advisory_xact_lock`` on a hash of the
key — reads the holders, sweeps the stale ones, decides, and inserts. A holder is stale when
its lease expired (its heartbeat thread stopped: the process died or hung) or, on the same
host, when its process is gone (pid not alive, or alive with another start time: pid reuse),
so a SIGKILLed run on this machine is recovered at once and a dead machine's after one lease.

The second run is REFUSED, not queued: a scheduler retries (exit 2, `TransientError`), and a
human sees who holds the lock and how to clear it. The cursor commit is additionally guarded
(`CursorStore.set_cursor` checks, in its own transaction, that the lock it was taken under is
still held), so a run whose lock was swept as stale can never move the cursor.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import xxhash

from rivet_core.errors import TransientError, best_effort
from rivet_core.orchestrator import accepts_legacy_run_id
from rivet_core.state._base import StoreBase
from rivet_core.state.database import StateDatabase, Transaction
from rivet_core.state.process_identity import process_alive, process_start
from rivet_core.state.schema import columns_sql, export_lock, insert_sql

_SELECT = f"SELECT {columns_sql(export_lock)} FROM export_lock"
_ONE = "lock_key = :lock_key AND token = :token"

log = logging.getLogger("rivet.state.lock")

#: Lease of a lock; the holder renews it every lease/4 seconds. RIVET_LOCK_LEASE_SECONDS overrides.
DEFAULT_LEASE_SECONDS = 60.0
LOCK_MODES = ("exclusive", "shared")


def lease_seconds() -> float:
    raw = os.environ.get("RIVET_LOCK_LEASE_SECONDS", "")
    try:
        value = float(raw) if raw else DEFAULT_LEASE_SECONDS
    except ValueError:
        value = DEFAULT_LEASE_SECONDS
    return max(value, 1.0)


def lock_key(export_name: str, window_label: str | None = None) -> str:
    return f"{export_name}@{window_label}" if window_label else export_name


def _host() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class LockHolder:
    """One row of export_lock, as the refusal message and `rivet state locks` show it."""

    lock_key: str
    token: str
    mode: str
    export_name: str
    run_id: str | None
    orchestrator_run_id: str | None
    #: The orchestrator's display name (rivet_core/orchestrator.py); None for a CLI run.
    orchestrator: str | None
    pid: int
    host: str
    process_start: str | None
    started_at: str
    heartbeat_at: str
    expires_at: str

    def stale_reason(self, now: datetime | None = None) -> str | None:
        """Why this holder is stale (lease expired / process gone), or None when it is live."""
        now = now or datetime.now(UTC)
        if datetime.fromisoformat(self.expires_at) < now:
            return f"its lease expired at {self.expires_at}"
        if self.host == _host() and not process_alive(self.pid, self.process_start):
            return f"process {self.pid} on {self.host} is gone"
        return None

    def describe(self) -> str:
        who = f"run {self.run_id}" if self.run_id else "a run"
        if self.orchestrator_run_id:
            who += f" ({self.orchestrator or 'orchestrator'} run {self.orchestrator_run_id})"
        kind = "chunk worker " if self.mode == "shared" else ""
        return (f"{kind}{who}, pid {self.pid} on host {self.host}, started at {self.started_at}, "
                f"last heartbeat {self.heartbeat_at}")


class ExportLocked(TransientError):
    """Another live run holds the export's lock; this run was refused before reading state."""

    code = "export_locked"

    def __init__(self, export_name: str, key: str, holder: LockHolder, config_hint: str = "…") -> None:
        what = (f"a chunked run of it by {holder.orchestrator or 'an orchestrator'} is in progress"
                if holder.mode == "shared" else "it is already running")
        scope = f" (time partition {key.split('@', 1)[1]})" if "@" in key else ""
        super().__init__(
            f"export '{export_name}'{scope} is locked: {what} — held by {holder.describe()}. "
            f"Nothing was done. Wait for that run to finish and run again; if that process is dead "
            f"(its lock is recovered automatically on the same host, or once its lease expires "
            f"{holder.expires_at}), clear it now with "
            f"`rivet state unlock -c {config_hint} -e {export_name}`")
        self.export_name, self.key, self.holder = export_name, key, holder


class ExportLockLost(TransientError):
    """The lock a run was taken under is no longer held (swept as stale): no cursor move."""

    code = "export_lock_lost"


def _advisory_key(key: str) -> int:
    return xxhash.xxh3_64_intdigest(("rivet_export_lock\0" + key).encode()) - (1 << 63)


class ExportLockHandle:
    """A held lock: renews its lease on a daemon thread until `release()` (idempotent).
    A handle that is garbage collected without release is released then (in-process leak)."""

    def __init__(self, store: ExportLockStore, key: str, token: str, export_name: str, lease: float) -> None:
        self.key, self.token, self.export_name, self.lease = key, token, export_name, lease
        self.lost = False
        self._stop = threading.Event()
        self._database = database = store.database
        self._finalizer = weakref.finalize(self, ExportLockHandle._shutdown, database, key, token, self._stop,
                                           store._held_locks)
        self._thread = threading.Thread(target=ExportLockHandle._renew, name=f"rivet-lock-{key}", daemon=True,
                                        args=(database, key, token, lease, self._stop, weakref.ref(self)))
        self._thread.start()

    @staticmethod
    def _renew(database: StateDatabase, key: str, token: str, lease: float, stop: threading.Event,
               handle: weakref.ref) -> None:
        while not stop.wait(lease / 4.0):
            # Best effort per beat: a failed beat is retried on the next; the lease covers 3 misses.
            with best_effort("export lock heartbeat", logger=log,
                             message=f"export lock {key}: heartbeat failed: {{reason}}"):
                now = datetime.now(UTC)
                with database.transaction() as tx:
                    n = tx.execute(f"UPDATE export_lock SET heartbeat_at = :heartbeat_at, expires_at = :expires_at "
                                   f"WHERE {_ONE}", {"lock_key": key, "token": token, "heartbeat_at": now.isoformat(),
                                                     "expires_at": (now + timedelta(seconds=lease)).isoformat()}
                                   ).rowcount
                if n == 0:
                    if stop.is_set():
                        return  # released while this beat ran: the row is gone because we let it go
                    log.error("export lock %s was taken from this run (swept as stale); its cursor will not "
                              "be committed", key)
                    owner = handle()
                    if owner is not None:
                        owner.lost = True
                    return

    @staticmethod
    def _shutdown(database: StateDatabase, key: str, token: str, stop: threading.Event, held: dict) -> None:
        stop.set()
        if held.get(key) == token:
            del held[key]
        with best_effort("release the export lock", logger=log,  # the lease expires on its own
                         message=f"export lock {key}: release failed ({{reason}}); it expires with its lease"):
            with database.transaction() as tx:
                tx.execute(f"DELETE FROM export_lock WHERE {_ONE}", {"lock_key": key, "token": token})

    def annotate(self, *, run_id: str | None = None) -> None:
        """Record the run id once the run has one (the lock is taken before planning)."""
        with best_effort("record the lock's run id", logger=log,  # descriptive only
                         message=f"export lock {self.key}: could not record run id: {{reason}}"):
            with self._database.transaction() as tx:
                tx.execute(f"UPDATE export_lock SET run_id = :run_id WHERE {_ONE}",
                           {"lock_key": self.key, "token": self.token, "run_id": run_id})

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def release(self) -> None:
        self._finalizer()


class ExportLockStore(StoreBase):
    """Acquire, inspect and clear export locks (module docstring)."""

    @property
    def _held_locks(self) -> dict[str, str]:
        """lock_key → token of the locks this store instance holds (guards set_cursor)."""
        held = self.__dict__.get("_export_locks_held")
        if held is None:
            held = self.__dict__["_export_locks_held"] = {}
        return held

    @accepts_legacy_run_id
    def acquire_export_lock(self, export_name: str, *, mode: str = "exclusive", window_label: str | None = None,
                            run_id: str | None = None, orchestrator_run_id: str | None = None,
                            orchestrator: str | None = None, config_hint: str = "…") -> ExportLockHandle:
        """Take the lock or raise ExportLocked naming the live holder (stale holders are swept)."""
        if mode not in LOCK_MODES:
            raise ValueError(f"lock mode must be one of {LOCK_MODES}, got {mode!r}")
        key, token, lease = lock_key(export_name, window_label), uuid.uuid4().hex, lease_seconds()
        now = datetime.now(UTC)
        pid = os.getpid()
        with self.database.transaction() as tx:
            if tx.postgresql:
                tx.execute("SELECT pg_advisory_xact_lock(:k)", {"k": _advisory_key(key)})
            holders = [_holder(r) for r in tx.execute(
                f"{_SELECT} WHERE lock_key = :lock_key ORDER BY started_at", {"lock_key": key}).all()]
            live: list[LockHolder] = []
            for h in holders:
                reason = h.stale_reason(now)
                if reason is None:
                    live.append(h)
                    continue
                log.warning("export '%s': recovering a stale lock (%s): %s", export_name, reason, h.describe())
                tx.execute(f"DELETE FROM export_lock WHERE {_ONE}", {"lock_key": key, "token": h.token})
            blocking = [h for h in live if mode == "exclusive" or h.mode == "exclusive"]
            if blocking:
                exclusive = [h for h in blocking if h.mode == "exclusive"]
                raise ExportLocked(export_name, key, (exclusive or blocking)[0], config_hint)
            row = dict(lock_key=key, token=token, mode=mode, export_name=export_name, run_id=run_id,
                       orchestrator_run_id=orchestrator_run_id, orchestrator=orchestrator, pid=pid, host=_host(),
                       process_start=process_start(pid), started_at=now.isoformat(), heartbeat_at=now.isoformat(),
                       expires_at=(now + timedelta(seconds=lease)).isoformat())
            tx.execute(insert_sql(export_lock, tuple(row)), row)
        if mode == "exclusive":
            self._held_locks[key] = token
        return ExportLockHandle(self, key, token, export_name, lease)

    def list_export_locks(self, export_name: str | None = None) -> list[LockHolder]:
        where = "WHERE export_name = :export_name " if export_name is not None else ""
        with self.database.transaction() as tx:
            return [_holder(r) for r in tx.execute(f"{_SELECT} {where}ORDER BY lock_key, started_at",
                                                   {"export_name": export_name}).all()]

    def clear_export_locks(self, export_name: str, *, force: bool = False) -> list[LockHolder]:
        """Delete the export's locks (`rivet state unlock`). Without `force`, a holder that is
        provably live on this host (its process exists) is refused: clearing it would let two
        runs race. Returns the rows removed."""
        key = {"export_name": export_name}
        with self.database.transaction() as tx:
            rows = [_holder(r) for r in tx.execute(f"{_SELECT} WHERE export_name = :export_name", key).all()]
            if not force:
                alive = [h for h in rows if h.host == _host() and h.stale_reason() is None]
                if alive:
                    raise ExportLocked(export_name, alive[0].lock_key, alive[0])
            tx.execute("DELETE FROM export_lock WHERE export_name = :export_name", key)
        return rows

    def _assert_lock_held(self, tx: Transaction, export_name: str) -> None:
        """Inside a cursor-commit transaction: if this store took the export's exclusive lock,
        it must still hold it (a run swept as stale must not move the cursor)."""
        token = self._held_locks.get(export_name)
        if token is None:
            return
        held = tx.execute(f"SELECT token FROM export_lock WHERE {_ONE}" + tx.locking("FOR UPDATE"),
                          {"lock_key": export_name, "token": token}).first()
        if held is None:
            raise ExportLockLost(
                f"export '{export_name}': this run's lock was recovered as stale by another run, so its cursor "
                "is not committed (the next run re-exports from the previous cursor)")


def _holder(row: dict) -> LockHolder:
    return LockHolder(**{k: row[k] for k in LockHolder.__dataclass_fields__})


__all__ = ["ExportLockStore", "ExportLockHandle", "ExportLocked", "ExportLockLost", "LockHolder", "lock_key",
           "lease_seconds", "DEFAULT_LEASE_SECONDS"]
