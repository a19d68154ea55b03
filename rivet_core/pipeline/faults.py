"""Fault-injection hooks used by crash tests (reference state-and-trust §7).

`RIVET_TEST_PANIC_AT=<point>` ends the process abruptly at that point — SIGKILL to itself,
so no `finally`, no atexit, no flush: exactly what a kill or power loss leaves behind.
`RIVET_TEST_ERROR_AT=<point>` raises `InjectedFault` there instead. Points fire from the
facades (record_part, RunStore, the single runner), so every runner inherits them. The
environment is read at each call, so a test can arm a point in a subprocess only.
"""

from __future__ import annotations

import os
import signal
import sys

from rivet_core.errors import RivetError

POINTS = ("after_source_read", "after_file_write", "after_manifest_update", "after_cursor_commit")


class InjectedFault(RivetError):
    """Raised at an armed RIVET_TEST_ERROR_AT point."""

    exit_code = 1


def _armed(var: str, point: str) -> bool:
    value = os.environ.get(var)
    return bool(value) and value.strip() == point


def fault_point(point: str) -> None:
    """Fire the hook named `point` if a test armed it; otherwise do nothing (cheap)."""
    if _armed("RIVET_TEST_PANIC_AT", point):
        sys.stderr.write(f"rivet: RIVET_TEST_PANIC_AT={point}: killing the process\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    if _armed("RIVET_TEST_ERROR_AT", point):
        raise InjectedFault(f"injected fault at {point} (RIVET_TEST_ERROR_AT)")
