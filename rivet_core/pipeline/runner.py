"""`run_unit`: run one export unit end to end, whichever run class its mode needs.

The CLI's single call (and `rivet_core.api`'s). Apart from job.py because the chunked
runner (chunked.py) extends job.py's `ExportRun`: choosing between them in job.py made the
base import its own subclass, a cycle. The chunked runner (and the chunk planning under it)
is imported only by a chunked export: the other modes never load it (issue 16 item 3).
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
