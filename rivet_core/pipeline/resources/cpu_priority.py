"""Lower this process's CPU priority while an export yields to a loaded source, then restore it.

Why: the source governor (`rivet_core/pipeline/resources/governor.py`) paces the *source* side — it
pauses between batches. But while a batch is read, decoded and encoded, the export's own
threads take whole CPU cores. When the exporter shares its cores with the database (the
database on the same host, or a container beside it), that CPU is taken from the very
sessions the governor is trying to spare: a loaded source's point queries then wait in the
CPU run queue behind the export's encoder (docs/benchmarks.md "Source governor under an OLTP
load"). So the first time the governor sees pressure, it also raises the nice value of every
thread of this process by `increment` (threads started later inherit it from their
creator): the export still uses any idle CPU, but a busy database's sessions run first. On a
host the database does not share, the change costs nothing measurable (nothing else wants
the CPU).

Linux only (per-thread nice through `/proc/self/task` and `setpriority(PRIO_PROCESS, tid)`);
elsewhere `lower` returns None and nothing changes. Raising a nice value needs no privilege.
Lowering it back needs `CAP_SYS_NICE` or an `RLIMIT_NICE` allowance, so `restore` is best
effort: without it the process keeps the lower priority until it exits — a `rivet run`
exits at the end of its exports; an orchestrator's step process at the end of its step.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

log = logging.getLogger("rivet.governor")

#: The highest nice value Linux allows (the lowest priority).
MAX_NICE = 19


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except (OSError, ValueError):
        return []


@dataclass
class LoweredPriority:
    """The threads whose nice value `lower` raised, with the value each had before, and the
    nice value of the thread that lowered them (`base`): threads started while lowered
    inherit `base + increment` and are put back to `base`."""

    increment: int
    base: int = 0
    before: dict[int, int] = field(default_factory=dict)

    @classmethod
    def lower(cls, increment: int) -> LoweredPriority | None:
        """Raise every thread's nice value by `increment` (capped at MAX_NICE). None when the
        platform cannot (no per-thread priorities) or no thread could be changed."""
        if increment <= 0 or not hasattr(os, "setpriority"):
            return None
        tids = _thread_ids()
        if not tids:
            return None
        base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        lowered = cls(increment, base)
        for tid in tids:
            try:
                old = os.getpriority(os.PRIO_PROCESS, tid)
                new = min(MAX_NICE, old + increment)
                if new != old:
                    os.setpriority(os.PRIO_PROCESS, tid, new)
                    lowered.before[tid] = old
            except OSError:  # the thread ended between listing and changing it
                continue
        return lowered if lowered.before else None

    def restore(self) -> bool:
        """Put each changed thread back to its former nice value. True when every thread that
        still exists is back; False when the kernel refused (no privilege to lower a nice
        value), in which case the process keeps the lower priority until it exits."""
        ok = True
        inherited = min(MAX_NICE, self.base + self.increment)
        for tid in _thread_ids():
            old = self.before.get(tid)
            try:
                if old is None:  # started while lowered: it inherited the lowered value
                    if os.getpriority(os.PRIO_PROCESS, tid) != inherited:
                        continue
                    old = self.base
                os.setpriority(os.PRIO_PROCESS, tid, old)
            except PermissionError:
                ok = False
            except OSError:  # the thread ended meanwhile
                continue
        if not ok:
            log.info("source governor: CPU priority stays lowered until the process exits "
                     "(restoring a nice value needs CAP_SYS_NICE)")
        return ok


class _Shared:
    """The one lowered priority of this process, shared by every governor that asked for it
    (parallel chunk windows each run a governor): the first hold lowers, the last release
    restores. Without the count, the first window to finish would restore the priority under
    the others, or a second lowering would record the first's value as the one to go back to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holds = 0
        self._lowered: LoweredPriority | None = None

    def hold(self, increment: int) -> bool:
        """Hold the lowered priority; True when it is lowered (now or already)."""
        with self._lock:
            if self._holds == 0:
                self._lowered = LoweredPriority.lower(increment)
                if self._lowered is None:
                    return False
            self._holds += 1
            return True

    def release(self) -> bool:
        """Give one hold back; the last one restores. True unless the restore was refused."""
        with self._lock:
            if self._holds == 0:
                return True
            self._holds -= 1
            if self._holds > 0 or self._lowered is None:
                return True
            lowered, self._lowered = self._lowered, None
            return lowered.restore()


_SHARED = _Shared()


def hold_lowered_priority(increment: int) -> bool:
    """Lower this process's CPU priority by `increment` for as long as someone holds it
    (module doc). Pair each True with one `release_lowered_priority()`."""
    return _SHARED.hold(increment)


def release_lowered_priority() -> bool:
    """Release one hold; the last one restores the former priorities (best effort: False when
    the kernel refused, and the process then keeps the lower priority until it exits)."""
    return _SHARED.release()
