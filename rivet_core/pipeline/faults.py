"""Fault-injection hooks used by crash and fault tests (docs/rivet-compat.md "Fault points and the crash map").

`RIVET_TEST_PANIC_AT=<point>` ends the process abruptly at that point — SIGKILL to itself,
so no `finally`, no atexit, no flush: exactly what a kill or power loss leaves behind.
`RIVET_TEST_ERROR_AT=<point>` raises `InjectedFault` there instead;
`RIVET_TEST_TRANSIENT_AT=<point>` raises `InjectedTransientFault` (a transient failure, exit 2).
`RIVET_TEST_PAUSE_AT=<point>` (with `RIVET_TEST_PAUSE_DIR=<dir>`) parks the process at the
point, the first time it is reached, until the test has done something to the world
around it (killed the S3 server, terminated the source backend, locked the state store):
the process creates `<dir>/<point>.reached` (holding its pid), then waits for
`<dir>/<point>.release`. It is a file barrier, not a sleep: the test polls for `.reached`,
acts, and creates `.release`. The wait is bounded (`RIVET_TEST_PAUSE_TIMEOUT_S`, default
120 s) and ends in `InjectedFault`, so a broken test never leaves a process behind.

Points fire from the facades (record_part, RunStore, the single runner) and from the read
loop (`during_source_read`, after each batch is staged — the source cursor is still open),
so every runner inherits them; `before_part_read` fires where a reader of a published
dataset (an orchestrator's IO manager) is about to read a part the manifest lists. The environment is read at each call, so a test can arm a
point in a subprocess only.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from rivet_core.errors import RivetError, TransientError

POINTS = ("during_source_read", "after_source_read", "after_file_write", "after_manifest_update",
          "after_table_commit", "after_cursor_commit", "after_bucket_set_recorded", "before_part_read",
          # mode: cdc (rivet_core/pipeline/cdc/run.py)
          "cdc_after_open", "cdc_after_read", "cdc_before_manifest", "cdc_after_flush_before_ack",
          "cdc_after_ack")

#: Pause points already taken by this process (a pause fires once: a retried read or the
#: next part passes straight through).
_paused: set[str] = set()


class InjectedFault(RivetError):
    """Raised at an armed RIVET_TEST_ERROR_AT point."""

    exit_code = 1


class InjectedTransientFault(TransientError):
    """Raised at an armed RIVET_TEST_TRANSIENT_AT point: a failure worth retrying (exit 2),
    like a dropped connection."""


def _armed(var: str, point: str) -> bool:
    value = os.environ.get(var)
    return bool(value) and value.strip() == point


def _pause(point: str) -> None:
    """The file barrier described in the module docstring."""
    _paused.add(point)
    directory = Path(os.environ.get("RIVET_TEST_PAUSE_DIR") or ".")
    timeout = float(os.environ.get("RIVET_TEST_PAUSE_TIMEOUT_S") or 120)
    release = directory / f"{point}.release"
    staged = directory / f".{point}.reached.{os.getpid()}"
    staged.write_text(str(os.getpid()))
    os.replace(staged, directory / f"{point}.reached")  # the test never reads a half-written pid
    deadline = time.monotonic() + timeout
    while not release.exists():
        if time.monotonic() > deadline:
            raise InjectedFault(f"pause at {point} was not released within {timeout:g} s "
                                f"(RIVET_TEST_PAUSE_AT)")
        time.sleep(0.01)  # polling a barrier file with a deadline


def fault_point(point: str) -> None:
    """Fire the hook named `point` if a test armed it; otherwise do nothing (cheap)."""
    if _armed("RIVET_TEST_PANIC_AT", point):
        sys.stderr.write(f"rivet: RIVET_TEST_PANIC_AT={point}: killing the process\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    if _armed("RIVET_TEST_ERROR_AT", point):
        raise InjectedFault(f"injected fault at {point} (RIVET_TEST_ERROR_AT)")
    if _armed("RIVET_TEST_TRANSIENT_AT", point):
        raise InjectedTransientFault(f"injected transient fault at {point} (RIVET_TEST_TRANSIENT_AT)")
    if point not in _paused and _armed("RIVET_TEST_PAUSE_AT", point):
        _pause(point)
