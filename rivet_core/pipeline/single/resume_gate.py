"""`--resume`, before anything is read: Rivet's warning and its `_SUCCESS` refusal, for every
export run (docs/rivet-compat.md "Recovery: Rivet's behaviour, or ours and why").

In Rivet's order: an export that is not chunked with `chunk_checkpoint: true` is warned
(`resume-no-checkpoint`: the flag has no effect there), then a prefix that already holds
`_SUCCESS` is refused unless `--force` — whatever the mode, so the refusal names `_SUCCESS`
even when no chunk run is in progress. A module of its own, light to import, because the
run (job.py `ExportRun.run`, whatever the mode) calls it before loading any chunk machinery
(tests/test_startup.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from rivet_core.config import ExportConfig
from rivet_core.destination import Destination
from rivet_core.errors import ConfigError
from rivet_core.manifest.layout import SUCCESS_KEY
from rivet_core.runrecord.summary import RunSummary


class GatedRun(Protocol):
    """What the gate reads of a run (an `ExportRun`, job.py, which imports this module — so
    the run is described here rather than imported)."""

    options: Any  # RunOptions: resume, force
    export: ExportConfig
    summary: RunSummary
    dest: Destination

#: The rule name Rivet gives the warning (its plan validation), kept so logs grep alike.
RESUME_NO_CHECKPOINT = "resume-no-checkpoint"


def gate_resume(run: GatedRun) -> None:
    """`--resume`: warn when it has no effect, refuse a prefix holding `_SUCCESS` without
    `--force` (module docstring). A no-op without `--resume`; `ExportRun.run` (job.py) is its
    one caller, for every mode."""
    if not run.options.resume:
        return
    export = run.export
    if not (export.mode == "chunked" and export.chunk_checkpoint):
        message = "--resume has no effect unless strategy is chunked with chunk_checkpoint: true"
        run.summary.add_warning(f"[{RESUME_NO_CHECKPOINT}] {message}")  # logged on stderr, kept in the report
        run.summary.journal.record("PlanWarning", rule=RESUME_NO_CHECKPOINT, message=message)
    if run.export.destination.type == "stdout" or run.options.force:
        return
    if run.dest.head(SUCCESS_KEY) is not None:
        raise ConfigError(
            f"export '{export.name}': --resume refused — destination prefix already has _SUCCESS from a prior "
            f"completed run ({run.dest.uri}); resuming would rewrite a verified dataset. Pass --force to "
            "override, or run without --resume")
