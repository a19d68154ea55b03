"""When a fast read path cannot run on the installed driver: one loud warning, and the line
`rivet doctor` shows.

Why: the fast readers use driver internals that are no contract (psycopg's libpq handle,
PyMySQL's socket reader), each behind one adapter module (postgres/libpq_access.py,
mysql/wire.py) with a version gate. A driver release that moves one of them must not turn
the fast path off silently: the export stays correct on the slower path, but a run several
times longer with nothing said is how a user finds out at 2 a.m. So the adapter describes
what is missing as a `Fallback`, the session logs it once per process at WARNING (a run
reads many windows; one line is enough), and `rivet doctor` prints which path each engine
takes (`SourceSession.planned_read_path`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

log = logging.getLogger("rivet.source")

_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


@dataclass(frozen=True)
class Fallback:
    """Why the fast path of one engine is off on this install, and what it costs.

    `driver`/`version`: the package whose internals moved (or rivet's C extension);
    `missing`: what the adapter could not find; `instead`: the path read through;
    `cost`: the measured slowdown (docs/benchmarks.md "Read paths"); `fix`: what to do."""

    driver: str
    version: str
    missing: str
    instead: str
    cost: str
    fix: str

    def message(self) -> str:
        """One line: driver and version, what is missing, the path taken, its cost, the fix."""
        return (f"{self.driver} {self.version}: {self.missing} — reading through {self.instead} "
                f"({self.cost}); {self.fix}")


def warn_once(fallback: Fallback) -> bool:
    """Log `fallback` at WARNING on `rivet.source` the first time this process meets it
    (True then; False when it was already said)."""
    text = fallback.message()
    with _WARNED_LOCK:
        if text in _WARNED:
            return False
        _WARNED.add(text)
    log.warning("fast read path off: %s", text)
    return True
