"""Memory guards of the tuning block (docs/rivet-compat.md "Tuning and batch sizing"), applied per fetched batch.

- `max_batch_memory_mb` + `on_batch_memory_exceeded`: a batch whose Arrow size exceeds the
  cap logs a WARN with a suggested smaller `batch_size` (`warn`), or fails the run before
  the batch is written (`fail`). `auto_shrink` cannot re-fetch a batch that is already in
  memory, so it warns and lowers nothing mid-stream; the next run should use the
  suggested size (documented deviation).
- `memory_threshold_mb`: when the process RSS is above it before a batch is written, the
  run pauses 5 s (a deliberate back-off to let the writer drain) and continues.
"""

from __future__ import annotations

import logging
import os
import time

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import DataIntegrityError
from rivet_core.lazy_modules import pa

log = logging.getLogger("rivet.memory")
PAUSE_SECONDS = 5.0


def current_rss_mb() -> int:
    """Resident set size now (not the peak), from /proc; 0 where unavailable."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return 0


class MemoryGuard:
    def __init__(self, tuning: ResolvedTuning, export_name: str) -> None:
        self.tuning, self.export_name = tuning, export_name
        self.warned = False

    def check(self, batch: pa.RecordBatch) -> None:
        cap = self.tuning.max_batch_memory_mb
        if cap:
            size_mb = batch.nbytes / (1024 * 1024)
            if size_mb > cap:
                suggested = max(1, int(batch.num_rows * cap / size_mb * 0.8))
                text = (f"export '{self.export_name}': a fetched batch holds {size_mb:.1f} MB, over "
                        f"max_batch_memory_mb={cap} — set tuning.batch_size to about {suggested}")
                if self.tuning.on_batch_memory_exceeded == "fail":
                    raise DataIntegrityError(text)
                if not self.warned:
                    log.warning(text)
                    self.warned = True
        threshold = self.tuning.memory_threshold_mb
        if threshold and current_rss_mb() > threshold:
            log.warning("export '%s': RSS above memory_threshold_mb=%d; pausing %.0f s",
                        self.export_name, threshold, PAUSE_SECONDS)
            time.sleep(PAUSE_SECONDS)  # back-off under memory pressure, not synchronisation
