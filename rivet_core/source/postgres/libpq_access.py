"""The one module that touches psycopg's internals and its libpq, for the binary COPY reader.

The C reader (`binary.py`, `_pgbinary.c`) loops over libpq's `PQgetCopyData` on the
session's own connection, which psycopg has no public API for: it needs the address of
that function in the very libpq psycopg loaded (found through `/proc/self/maps` and ctypes,
or psycopg's own ctypes binding `psycopg.pq._pq_ctypes` when psycopg runs on its pure-Python
implementation), the `PGconn *` (`pgconn.pgconn_ptr`), and, once the C loop has consumed the
COPY's data, psycopg's `Copy._finished` flag and `psycopg.errors.error_from_result` to end
the COPY as psycopg would. Those are not a contract, so they are used here only, and only
on a psycopg release whose minor version the tests have run against (`TESTED`;
tests/source/test_driver_contracts.py exercises every function below against the server,
on the locked release and on the oldest one pyproject.toml admits).

On any other release, or when something is missing, `fallback` says what and the session
reads through ADBC (or the row path) — slower, never wrong — and says so once at WARNING
(`fast_path.warn_once`), so a driver upgrade cannot turn the fast path off silently.

When psycopg's range in pyproject.toml widens, run tests/source/test_driver_contracts.py
against the new release, then add its minor version to `TESTED`.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from typing import Any

import psycopg

from rivet_core.source.fast_path import Fallback
from rivet_core.source.postgres.copy import adbc_installed

#: psycopg (major, minor) releases the binary COPY reader is tested against (pyproject.toml:
#: psycopg[binary]>=3.2,<3.4).
TESTED: tuple[tuple[int, int], ...] = ((3, 2), (3, 3))

_LIBPQ: tuple[int, int, Any] | None = None
_LIBPQ_LOCK = threading.Lock()


def psycopg_version() -> str:
    """The installed psycopg release, as it spells it (e.g. "3.3.9")."""
    return str(psycopg.__version__)


def _minor(version: str) -> tuple[int, int] | None:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else None


# --- why not ------------------------------------------------------------------------------

def fallback(conn: psycopg.Connection[Any]) -> Fallback | None:
    """Why the C reader cannot drive this connection on this psycopg (None: it can)."""
    missing = _gate() or _missing_libpq(conn)
    return None if missing is None else not_usable(missing, _tested_fix(missing))


def not_usable(missing: str, fix: str) -> Fallback:
    """The `Fallback` of the binary COPY reader: the path taken instead is ADBC's binary COPY
    when its wheels are installed (≈1.3× slower), else the row path (≈5× slower) — the
    `orders` xact figures of docs/benchmarks.md "Read paths"."""
    if adbc_installed():
        instead, cost = "ADBC's binary COPY instead of the C binary COPY reader", "≈1.3× slower"
    else:
        instead, cost = "psycopg's row path instead of the C binary COPY reader", "≈5× slower"
    return Fallback("psycopg", psycopg_version(), missing, instead, cost, fix)


def _gate() -> str | None:
    minor = _minor(psycopg_version())
    if minor in TESTED:
        return None
    return f"not a release the binary COPY reader is tested with ({_tested()})"


def _tested() -> str:
    return ", ".join(f"{major}.{minor}" for major, minor in TESTED)


def _tested_fix(missing: str) -> str:
    newest = max(TESTED)
    minor = _minor(psycopg_version())
    if minor is not None and minor > newest:
        return f"pin psycopg<{newest[0]}.{newest[1] + 1} or upgrade rivet"
    if minor is not None and minor < min(TESTED):
        return f"upgrade psycopg to a tested release ({_tested()})"
    return f"install a tested psycopg release ({_tested()}) or upgrade rivet"


def _missing_libpq(conn: psycopg.Connection[Any]) -> str | None:
    """What is missing to drive `conn` from C (None: nothing)."""
    try:
        _, _, lib = _libpq()
        version = lib.PQserverVersion(pgconn_pointer(conn))
    except ImportError as exc:
        return f"psycopg.pq._pq_ctypes is gone ({exc})"
    except AttributeError as exc:
        return f"a psycopg internal is gone ({exc})"
    except OSError as exc:
        return f"psycopg's libpq cannot be found ({exc})"
    if version != conn.info.server_version:  # not the library that owns this PGconn
        return "the loaded libpq does not own psycopg's connection"
    return None


# --- libpq --------------------------------------------------------------------------------

def copy_data_functions() -> tuple[int, int]:
    """Addresses of `PQgetCopyData` and `PQfreemem` in psycopg's libpq (for `_pgbinary`)."""
    get, free, _ = _libpq()
    return get, free


def pgconn_pointer(conn: psycopg.Connection[Any]) -> int:
    """The connection's `PGconn *`, as an integer."""
    return int(conn.pgconn.pgconn_ptr)


def _libpq() -> tuple[int, int, Any]:
    """(PQgetCopyData, PQfreemem, the ctypes library) of the libpq psycopg uses."""
    global _LIBPQ
    with _LIBPQ_LOCK:
        if _LIBPQ is None:
            lib = _load_libpq()
            lib.PQserverVersion.restype = ctypes.c_int
            lib.PQserverVersion.argtypes = [ctypes.c_void_p]
            _LIBPQ = (ctypes.cast(lib.PQgetCopyData, ctypes.c_void_p).value or 0,
                      ctypes.cast(lib.PQfreemem, ctypes.c_void_p).value or 0, lib)
        return _LIBPQ


def _load_libpq() -> Any:
    if psycopg.pq.__impl__ == "python":  # psycopg's ctypes binding holds the library
        from psycopg.pq import _pq_ctypes

        return _pq_ctypes.pq
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted(set(re.findall(r"(/\S*/libpq[^/\s]*\.so[^/\s]*)", maps.read())))
    except OSError as exc:
        raise OSError("cannot list the loaded libraries (/proc/self/maps)") from exc
    if not paths:
        raise OSError("psycopg's libpq is not among the loaded libraries")
    own = _psycopg_binary_libs()
    paths.sort(key=lambda path: _libpq_rank(path, own))
    # RTLD_NOLOAD: the library psycopg already loaded, never a second copy.
    return ctypes.CDLL(paths[0], mode=getattr(os, "RTLD_NOLOAD", 0))


def _libpq_rank(path: str, own: str | None) -> int:
    """Which loaded libpq is psycopg's: 0 the one psycopg[binary] ships (its wheel's
    `psycopg_binary.libs/`), 1 a system one (psycopg[c] links it), 2 any other wheel's copy.

    Several can be loaded at once: a process that also uses psycopg2 (an orchestrator's worker
    whose own storage is on PostgreSQL, say) has the libpq psycopg2's wheel ships under
    `psycopg2_binary.libs/`. Taking that one (the old rule only preferred paths naming
    "psycopg", and it sorts first) fails the ownership check in `_missing_libpq`, and every
    read fell back to ADBC at about half the speed. `own`: `_psycopg_binary_libs()`."""
    if own is not None and path.startswith(own):
        return 0
    return 2 if ".libs/" in path else 1


def _psycopg_binary_libs() -> str | None:
    """`…/site-packages/psycopg_binary.libs/` when psycopg runs on its binary wheel."""
    if psycopg.pq.__impl__ != "binary":
        return None
    import psycopg_binary

    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(psycopg_binary.__file__))),
                        "psycopg_binary.libs") + "/"


# --- ending a COPY the C loop consumed ------------------------------------------------------

def end_copy(conn: psycopg.Connection[Any], copy: psycopg.Copy) -> list[Any]:
    """Read the COPY's final results off the connection and tell psycopg's `Copy` they are
    consumed (else leaving its block would wait for a result that never comes)."""
    pgconn = conn.pgconn
    results = []
    while (result := pgconn.get_result()) is not None:
        results.append(result)
    copy._finished = True
    return results


def raise_first_error(conn: psycopg.Connection[Any], results: list[Any]) -> None:
    """Raise the server's error of the first failed result, as psycopg's own exception."""
    for result in results:
        if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
