"""`run_unit`: run one export unit end to end, whichever runner its mode needs.

The CLI's single call (and `rivet_core.api`'s), and the door to the runners: the
single-query run (single/job.py `ExportRun`, whose phases every runner builds on) or the
chunked run (chunked/run.py `ChunkedRun`). Apart from job.py because choosing there would make
the base import its own subclass, a cycle. The chunked runner and the chunk planning under it
are imported only by a chunked export: the other modes never load them (tests/test_startup.py).
"""

from __future__ import annotations

from typing import Any

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.pipeline.single.job import ExportRun, RunOptions
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore


def run_unit(config: RivetConfig, export: ExportConfig, options: RunOptions | None = None,
             *, state: StateStore | None = None, notifications: Any = "config") -> RunSummary:
    """Run one export unit end to end and return its summary. Run errors are reported in the
    summary (never raised); planning/config errors raise before anything is written."""
    if export.mode == "cdc":
        from rivet_core.pipeline.cdc import run_cdc

        return run_cdc(config, export, options, state=state, notifications=notifications)
    if export.mode == "chunked":
        from rivet_core.pipeline.chunked.run import ChunkedRun

        return ChunkedRun(config, export, options, state=state, notifications=notifications).run()
    return ExportRun(config, export, options, state=state, notifications=notifications).run()
