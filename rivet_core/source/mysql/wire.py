"""The one module that touches PyMySQL's private internals, for the packet readers.

The binary (`binary.py`) and text (`raw.py`) read paths read row packets straight off the
connection's socket and send prepared-statement commands, which PyMySQL has no public API
for: they need the buffered socket reader (`_rfile`), the packet sequence counter
(`_next_seq_id`), `_read_packet`, `_execute_command`, `_force_close` and the read-timeout
bookkeeping, and the session reads a cursor's column descriptors from `cursor._result`.
Those names are not a contract, so they are used here only, and only on a PyMySQL release
whose minor version the tests have run against (`TESTED`). On any other release, or on a
connection that lacks one of them, `unsupported_reason` says why and the session reads
through the row path (PyMySQL's public cursor API) — slower, never wrong.

When PyMySQL's range in pyproject.toml widens, run tests/source/test_mysql_read_paths.py and
tests/source/test_mysql_frame.py against the new release, then add its minor version here.
"""

from __future__ import annotations

import ssl
from typing import Any

import pymysql

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
    version = pymysql_version()
    if version[:2] not in TESTED:
        tested = ", ".join(f"{major}.{minor}" for major, minor in TESTED)
        return (f"PyMySQL {'.'.join(map(str, version))} is not a release the packet readers "
                f"are tested with ({tested}); install a tested release for the fast path")
    for member in _CONNECTION_MEMBERS:
        if not hasattr(conn, member):
            return f"PyMySQL connection has no {member} (PyMySQL {'.'.join(map(str, version))})"
    if getattr(conn, "_rfile", None) is None:
        return "the connection has no socket reader"
    return None


def result_of(cursor: Any) -> Any:
    """The cursor's current result (PyMySQL's MySQLResult) or None: its column descriptor
    packets (`.fields`), value converters and unbuffered state."""
    return cursor._result


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
