"""Retry classification of source errors and the backoff schedule (docs/rivet-compat.md "Retries").

`classify_error` answers one question for every runner: is this failure worth another
attempt, on a fresh connection or the same one, and after how much extra delay? Order of
evidence, strongest first: Rivet's own error classes, then structured driver codes
(PostgreSQL SQLSTATE, MySQL/MariaDB errno), then the message text for errors that carry no
code (sockets, DNS). The whole `__cause__`/`__context__` chain is searched, so a
`SourceError` raised `from` a driver error classifies like the driver error.

Contract: a statement-*duration* timeout is permanent (the identical query would time out
again), a lock-wait timeout is transient, and **anything unrecognised is permanent** — a
wrong "transient" burns the retry budget and, after a committed part, would duplicate data.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from rivet_core.errors import ConfigError, RivetError, TransientError

T = TypeVar("T")

#: Ceiling of one exponential-backoff wait before `extra_ms` is added.
MAX_BACKOFF_MS = 60_000


@dataclass(frozen=True)
class RetryDecision:
    """What a runner should do about one failure."""

    transient: bool
    needs_reconnect: bool = False
    extra_delay_ms: int = 0
    reason: str = ""


def _permanent(reason: str) -> RetryDecision:
    return RetryDecision(False, False, 0, reason)


def _transient(reason: str, *, reconnect: bool, extra_ms: int = 0) -> RetryDecision:
    return RetryDecision(True, reconnect, extra_ms, reason)


def backoff_ms(attempt: int, base_ms: int, extra_ms: int = 0) -> int:
    """Wait before retry `attempt` (1-based): min(base·2^(attempt-1), 60 s) + extra."""
    exponent = max(attempt - 1, 0)
    # Cap the exponent so a huge attempt number cannot build a gigantic integer.
    wait = base_ms * (2 ** min(exponent, 32))
    return min(wait, MAX_BACKOFF_MS) + extra_ms


def retry_transient(attempt: Callable[[int], T], *, max_retries: int,
                    retryable: Callable[[BaseException, RetryDecision], bool] = lambda _exc, d: d.transient,
                    before_retry: Callable[[int, BaseException, RetryDecision], None] | None = None) -> T:
    """`attempt(n)` (n from 0) until it returns: the one retry loop of the runners.

    A failure is classified (`classify_error`) and tried again while `retryable(error,
    decision)` holds and fewer than `max_retries` retries were made; otherwise it is raised
    as it came. `before_retry(n, error, decision)` runs before retry n (from 1) — the
    caller's journal, its backoff wait, or a refusal to retry (it raises) once something was
    committed that a retry would duplicate."""
    tries = 0
    while True:
        try:
            return attempt(tries)
        except Exception as exc:  # error boundary: retried when the caller's rule allows, else re-raised
            decision = classify_error(exc)
            if not retryable(exc, decision) or tries >= max_retries:
                raise
            tries += 1
            if before_retry is not None:
                before_retry(tries, exc, decision)


# --- PostgreSQL ------------------------------------------------------------------------

def _classify_sqlstate(sqlstate: str, message: str) -> RetryDecision:
    if sqlstate.startswith("08"):
        return _transient(f"connection exception (SQLSTATE {sqlstate})", reconnect=True)
    if sqlstate in ("57P01", "57P02", "57P03"):
        return _transient(
            f"server shutting down or starting up (SQLSTATE {sqlstate})",
            reconnect=True, extra_ms=15_000,
        )
    if sqlstate == "53300":
        return _transient("too many connections (SQLSTATE 53300)", reconnect=True, extra_ms=15_000)
    if sqlstate in ("40001", "40P01"):
        return _transient(
            f"serialization failure or deadlock (SQLSTATE {sqlstate})", reconnect=False,
            extra_ms=1_000,
        )
    if sqlstate == "55P03":
        return _transient("lock timeout (SQLSTATE 55P03)", reconnect=False)
    if sqlstate == "57014":
        why = "statement timeout" if "statement timeout" in message else "query cancelled"
        return _permanent(
            f"{why} (SQLSTATE 57014): the same query would fail again — raise "
            "tuning.statement_timeout_s or split the export with mode: chunked"
        )
    if sqlstate.startswith("53"):
        return _transient(
            f"insufficient resources (SQLSTATE {sqlstate})", reconnect=False, extra_ms=5_000,
        )
    if sqlstate.startswith("28"):
        return _permanent(f"authentication failed (SQLSTATE {sqlstate})")
    if sqlstate.startswith("42"):
        return _permanent(f"syntax error or undefined object (SQLSTATE {sqlstate})")
    return _permanent(f"SQLSTATE {sqlstate} is not retryable")


# --- MySQL / MariaDB -------------------------------------------------------------------

_MYSQL_RECONNECT = {
    2002: "cannot connect (socket)", 2003: "cannot connect to server",
    2006: "server has gone away", 2013: "lost connection during query",
    2055: "lost connection",
}
_MYSQL_PERMANENT = {
    1044: "database access denied", 1045: "access denied (bad credentials)",
    1049: "unknown database", 1064: "SQL syntax error", 1146: "table does not exist",
    1054: "unknown column", 3024: "statement timeout (max_execution_time)",
    1969: "statement timeout (max_statement_time)",
}


def _classify_mysql_errno(errno: int) -> RetryDecision | None:
    if errno in _MYSQL_RECONNECT:
        return _transient(f"MySQL error {errno}: {_MYSQL_RECONNECT[errno]}", reconnect=True)
    if errno == 1205:
        return _transient("MySQL error 1205: lock wait timeout", reconnect=False)
    if errno == 1213:
        return _transient("MySQL error 1213: deadlock", reconnect=False, extra_ms=1_000)
    if errno in (1040, 1053):
        return _transient(
            f"MySQL error {errno}: too many connections or server shutdown",
            reconnect=True, extra_ms=15_000,
        )
    if errno in _MYSQL_PERMANENT:
        return _permanent(f"MySQL error {errno}: {_MYSQL_PERMANENT[errno]}")
    return None


# --- Message text (errors without a structured code) -----------------------------------

_RECONNECT_NEEDLES = (
    "connection reset", "broken pipe", "connection refused", "no route to host",
    "network is unreachable", "name resolution", "name or service not known",
    "could not translate host name", "unexpected eof", "closed the connection unexpectedly",
    "server closed the connection", "gone away", "lost connection",
    "can't connect to mysql server", "ssl handshake", "connection is closed",
    "the connection is lost",
    # PostgreSQL's FATAL for pg_terminate_backend / shutdown, when only its text reaches us
    # (ADBC's record-batch stream errors carry no SQLSTATE)
    "terminating connection due to administrator command",
    "could not receive data from server",
)
_DURATION_TIMEOUT_NEEDLES = (
    "due to statement timeout", "execution time exceeded", "max_execution_time",
    "max_statement_time",
)
_CAPACITY_NEEDLES = (
    "too many connections", "too many clients", "connection slots are reserved",
    "the database system is starting up", "the database system is shutting down",
)


def _classify_message(message: str) -> RetryDecision | None:
    text = message.lower()
    if any(n in text for n in _DURATION_TIMEOUT_NEEDLES):
        return _permanent("statement-duration timeout: the same query would time out again")
    if "permission denied" in text or "access denied" in text:
        return _permanent("permission or credential error")
    if any(n in text for n in _CAPACITY_NEEDLES):
        return _transient("server at capacity or restarting", reconnect=True, extra_ms=15_000)
    if any(n in text for n in _RECONNECT_NEEDLES):
        return _transient("network or connection failure", reconnect=True)
    if "deadlock" in text or "could not serialize access" in text:
        return _transient("deadlock or serialization failure", reconnect=False, extra_ms=1_000)
    if "lock wait timeout" in text or "timed out" in text or "timeout" in text:
        return _transient("timeout while waiting (lock or network)", reconnect=False)
    if "(temporary)" in text:
        return _transient("service reported a temporary failure", reconnect=False, extra_ms=500)
    return None


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        chain.append(current)
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return chain


def _classify_one(exc: BaseException) -> RetryDecision | None:
    module = type(exc).__module__ or ""
    if module.startswith("pymysql"):
        # MySQL errno is precise; its SQLSTATE is often the catch-all HY000.
        if exc.args and isinstance(exc.args[0], int):
            return _classify_mysql_errno(exc.args[0])
        return None
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        return _classify_sqlstate(sqlstate, str(exc))
    if isinstance(exc, (ConnectionError, socket.gaierror)):
        return _transient(f"network error: {type(exc).__name__}", reconnect=True)
    if isinstance(exc, TimeoutError):
        return _transient("network timeout", reconnect=True)
    return None


def classify_error(exc: BaseException) -> RetryDecision:
    """Classify `exc` (and its cause chain) as transient or permanent; see module doc."""
    chain = _exception_chain(exc)
    # Rivet's own non-transient classes are decisions already made with more context.
    if isinstance(exc, RivetError) and not isinstance(exc, TransientError):
        if isinstance(exc, ConfigError) or exc.__cause__ is None:
            return _permanent(f"{type(exc).__name__} is not retryable")
    for link in chain:
        decision = _classify_one(link)
        if decision is not None:
            return decision
    for link in chain:
        decision = _classify_message(str(link))
        if decision is not None:
            return decision
    if any(isinstance(link, TransientError) for link in chain):
        return _transient("marked transient by Rivet", reconnect=True)
    return _permanent(f"unrecognised error ({type(exc).__name__}) is treated as permanent")
