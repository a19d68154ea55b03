"""The one module that touches PyMySQL's private internals, for the packet readers.

The binary (`binary.py`) and text (`raw.py`) read paths read row packets straight off the
connection's socket and send prepared-statement commands, which PyMySQL has no public API
for: they need the buffered socket reader (`_rfile`), the packet sequence counter
(`_next_seq_id`), `_read_packet`, `_execute_command`, `_force_close` and the read-timeout
bookkeeping, and the session reads a cursor's column descriptors from `cursor._result`;
connections override `_create_ssl_ctx` for one shared `preferred`-mode TLS context.
The packet readers also keep PyMySQL's result object (`MySQLResult`) in the state its own
drain would leave (`end_result`, `abandon_result`, `BinaryResult` for a prepared statement's
rows). Those names are not a contract, so they are used here only, and only on a PyMySQL
release whose minor version the tests have run against (`TESTED`). On any other release, or
on a connection that lacks one of them, `fallback` says what is missing, the session warns
once (`fast_path.warn_once`) and reads through the row path (PyMySQL's public cursor API) —
slower, never wrong; `rivet doctor` shows the path (`raw.planned_path`).

When PyMySQL's range in pyproject.toml widens, run tests/source/test_driver_contracts.py
(every function here, against the server), tests/source/test_mysql_read_paths.py and
tests/source/test_mysql_frame.py against the new release, then add its minor version here.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import pymysql

from rivet_core.source.fast_path import Fallback

#: PyMySQL (major, minor) releases the packet readers are tested against (pyproject.toml:
#: PyMySQL>=1.1,<1.3). `pymysql.VERSION` is the release; `pymysql.__version__` is not (it
#: mimics mysqlclient's version for Django).
TESTED: tuple[tuple[int, int], ...] = ((1, 1), (1, 2))

_CONNECTION_MEMBERS = ("_rfile", "_next_seq_id", "_force_close", "_sock", "_read_packet",
                       "_execute_command", "_read_timeout")


def pymysql_version() -> tuple[int, int, int]:
    """The installed PyMySQL release (major, minor, patch)."""
    major, minor, patch = pymysql.VERSION[:3]
    return int(major), int(minor), int(patch)


def unsupported_reason(conn: Any) -> str | None:
    """Why the packet readers cannot use this connection (None = they can)."""
    missing = _missing(conn)
    if missing is None:
        return None
    shown = ".".join(map(str, pymysql_version()))
    if missing.startswith("not a release"):
        return f"PyMySQL {shown} is {missing}; install a tested release for the fast path"
    return f"{missing} (PyMySQL {shown})"


def _missing(conn: Any) -> str | None:
    """What the packet readers miss on this PyMySQL and connection (None: nothing)."""
    if pymysql_version()[:2] not in TESTED:
        return f"not a release the packet readers are tested with ({_tested()})"
    for member in _CONNECTION_MEMBERS:
        if not hasattr(conn, member):
            return f"PyMySQL connection has no {member}"
    if getattr(conn, "_rfile", None) is None:
        return "the connection has no socket reader"
    return None


def _tested() -> str:
    return ", ".join(f"{major}.{minor}" for major, minor in TESTED)


def fallback(conn: Any) -> Fallback | None:
    """`unsupported_reason` as the loud `Fallback` (None: the packet readers run). The row
    path is 3.8× (`orders`) to 6.6× (`narrow`) longer than the binary protocol
    (docs/benchmarks.md "Read paths", MariaDB xact)."""
    missing = _missing(conn)
    if missing is None:
        return None
    version = pymysql_version()
    newest = max(TESTED)
    if version[:2] > newest:
        fix = f"pin PyMySQL<{newest[0]}.{newest[1] + 1} or upgrade rivet"
    else:
        fix = f"install a tested PyMySQL release ({_tested()}) or upgrade rivet"
    return Fallback("PyMySQL", ".".join(map(str, version)), missing,
                    "PyMySQL's row path instead of the binary-protocol packet reader",
                    "≈4–7× slower", fix)


@functools.cache
def preferred_tls_context() -> ssl.SSLContext:
    """The one context of MySQL's `preferred` TLS mode: encrypt when the server offers TLS,
    verify nothing (what PyMySQL does with no `ssl` options). Shared by every connection
    because PyMySQL builds a fresh `ssl.create_default_context()` per connection for this
    mode, which loads the system CA store only to ignore it (`CERT_NONE`): ~40 ms of CPU per
    connection on an idle machine."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


class _Connection(pymysql.connections.Connection):  # type: ignore[type-arg]
    """PyMySQL's connection with one change: its `preferred` mode (PyMySQL calls
    `_create_ssl_ctx({})` only for that mode) takes `preferred_tls_context()`. Every other
    mode passes our own context (rivet_core/source/tls.py), which PyMySQL uses as given."""

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if isinstance(sslp, dict) and not sslp:
            return preferred_tls_context()
        return super()._create_ssl_ctx(sslp)  # type: ignore[no-any-return]


def connect(**args: Any) -> pymysql.connections.Connection[Any]:
    """`pymysql.connect(**args)`, with the shared `preferred` TLS context on a tested PyMySQL
    release (`TESTED`: `_create_ssl_ctx` is private); on another release, PyMySQL's own."""
    if pymysql_version()[:2] in TESTED and hasattr(pymysql.connections.Connection, "_create_ssl_ctx"):
        return _Connection(**args)
    return pymysql.connect(**args)


def unread_rows(cursor: Any) -> Any:
    """The unbuffered result whose rows are still on the socket, or None (no result set, or
    already read)."""
    result = cursor._result
    return result if result is not None and result.unbuffered_active else None


def value_converters(result: Any) -> list[Any]:
    """PyMySQL's (encoding, decoder) per column of `result` (MySQLResult.converters)."""
    return list(result.converters)


class BinaryResult:
    """What PyMySQL's MySQLResult holds for an unbuffered result, for a prepared statement's
    rows (read by the packet reader, never by a PyMySQL cursor)."""

    def __init__(self, conn: Any) -> None:
        self.connection = conn
        self.unbuffered_active = True
        self.warning_count = 0
        self.has_next = False
        self.rows = None


def end_result(result: Any, warnings: int, has_next: bool) -> None:
    """The result's EOF packet was read: record what PyMySQL's own drain would and release
    the result, so `cursor.close()` and the next statement work as usual."""
    result.warning_count = warnings
    result.has_next = has_next
    result.unbuffered_active = False
    result.connection = None
    result.rows = None


def abandon_result(result: Any) -> None:
    """The server ended the result with an error packet: nothing more to read."""
    result.unbuffered_active = False


def field_packets(cursor: Any) -> list[Any]:
    """The column descriptor packets of the cursor's current result ([] when none)."""
    result = cursor._result
    return list(result.fields) if result is not None else []


def is_tls(conn: Any) -> bool:
    """Whether the connection's socket is TLS (PyMySQL silently stays plain text when the
    server offers no TLS; the session refuses that when TLS was asked for)."""
    return isinstance(getattr(conn, "_sock", None), ssl.SSLSocket)


class Wire:
    """One connection's socket, packet counter and command channel."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    # --- commands (prepared statements) ------------------------------------------------

    def execute_command(self, command: int, payload: str | bytes) -> None:
        self.conn._execute_command(command, payload)

    def read_packet(self, packet_type: Any = None) -> Any:
        """The next packet through PyMySQL's own reader (raises the server's error)."""
        if packet_type is None:
            return self.conn._read_packet()
        return self.conn._read_packet(packet_type)

    # --- raw socket reads (row packets) ------------------------------------------------

    def use_read_timeout(self) -> None:
        """Put the socket on the connection's read timeout, as `_read_packet` would."""
        conn = self.conn
        if getattr(conn, "_current_timeout", None) != conn._read_timeout:
            conn._sock.settimeout(conn._read_timeout)
            conn._current_timeout = conn._read_timeout

    def read(self, size: int) -> bytes:
        """Exactly `size` bytes (fewer only at end of stream)."""
        return self.conn._rfile.read(size)

    def read1(self, size: int) -> bytes:
        """Whatever is buffered or arrives in one socket read, up to `size` bytes."""
        return self.conn._rfile.read1(size)

    @property
    def next_seq_id(self) -> int:
        return self.conn._next_seq_id

    @next_seq_id.setter
    def next_seq_id(self, value: int) -> None:
        self.conn._next_seq_id = value

    def force_close(self) -> None:
        """Drop the connection after a protocol error (it cannot be resynchronised)."""
        self.conn._force_close()
