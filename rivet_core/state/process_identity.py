"""Who a pid is: its start time (to tell a live holder from a recycled pid) and whether it
still runs.

A lock row (locks.py) and a staging directory's owner file (pipeline/staging/directories.py) record the
holder's pid and start time; a later run on the same host asks whether that process is still
the one that wrote it. Every run asks this once for itself before its first source query,
so the Linux answer reads `/proc` directly: importing psutil costs ~11 ms of that start-up
(docs/benchmarks.md, "Start-up: the first query without psutil"). psutil answers on other
systems and whenever `/proc` cannot be read.

The start time is psutil's own value for the same process — seconds since the epoch, the
boot time (`btime` of `/proc/stat`) plus the process's start tick (field 22 of
`/proc/<pid>/stat`) over the clock-tick rate, formatted to the millisecond — so rows written
by a run that used psutil and rows written by this code compare equal.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache

_PROC = "/proc"


@cache
def _procfs() -> bool:
    """Whether this is Linux with `/proc` mounted (else psutil answers)."""
    return sys.platform.startswith("linux") and os.path.exists(f"{_PROC}/self/stat")


@cache
def _boot_time() -> float:
    with open(f"{_PROC}/stat", "rb") as fh:
        for line in fh:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise OSError(f"no btime line in {_PROC}/stat")


def _stat_fields(pid: int) -> list[bytes]:
    """The fields of `/proc/<pid>/stat` after the command name (which may hold spaces and
    parentheses, so the split starts after the LAST `)`): [0] is the state, [19] the start tick."""
    with open(f"{_PROC}/{pid}/stat", "rb") as fh:
        data = fh.read()
    return data[data.rfind(b")") + 2:].split()


@dataclass(frozen=True)
class _Seen:
    """One look at a process that exists: whether it is a zombie (killed, not yet reaped by
    its parent) and its start time; None where that cannot be known."""

    zombie: bool | None
    start: str | None


_UNKNOWN = _Seen(zombie=None, start=None)


def _look(pid: int) -> _Seen | None:
    """What `/proc/<pid>/stat` says of the process (one read), psutil where `/proc` cannot
    answer; None when the process is gone."""
    if _procfs():
        try:
            fields = _stat_fields(pid)
            return _Seen(zombie=fields[0] == b"Z",
                         start=f"{float(fields[19]) / os.sysconf('SC_CLK_TCK') + _boot_time():.3f}")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, IndexError):  # /proc hidden or unreadable: ask psutil
            pass
    return _look_psutil(pid)


def _look_psutil(pid: int) -> _Seen | None:
    try:
        import psutil
    except ImportError:
        return _UNKNOWN
    try:
        proc = psutil.Process(pid)
        return _Seen(zombie=proc.status() == psutil.STATUS_ZOMBIE, start=f"{proc.create_time():.3f}")
    except psutil.NoSuchProcess:
        return None
    except (psutil.Error, OSError):  # no access: the pid check alone decides
        return _UNKNOWN


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (seconds since the epoch, 3 decimals), or None when it
    cannot be known."""
    seen = _look(pid)
    return None if seen is None else seen.start


def process_alive(pid: int, started: str | None) -> bool:
    """Whether process `pid` on THIS host still runs: the pid exists, is not a zombie, and
    started when the recorded holder did (`started`; None: not recorded, the pid decides)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    seen = _look(pid)
    if seen is None or seen.zombie:
        return False
    return started is None or seen.start is None or seen.start == started


__all__ = ["process_alive", "process_start"]
