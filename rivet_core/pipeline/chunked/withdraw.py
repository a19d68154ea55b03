"""Withdrawing a chunked run's windows when a gate fails after they were written.

A single-unit run stages everything and gates before any part is published (ADR-0002). A
chunked run cannot: each window is written and committed as it finishes, and the total
quality gate (`row_count_min/max` over the whole export) can only be judged once every window
is in. So when that gate fails, the windows already at the destination are *withdrawn*:

1. every part this run recorded (`summary.manifest_parts`) that is not in `keep` is moved to
   `_quarantine/<run_id>/<key>` (`quarantine_object`; never deleted, M9). `keep` holds the
   parts the prefix's current good manifest lists (an orchestrated chunk run carries windows of the
   published run: those stay, the last good delivery is untouched);
2. the moved parts leave the run's manifest parts and its file/byte counters, so the finalize
   sequence writes no manifest, no per-run copy and no `_SUCCESS`, and the cursor does not
   move (the run is failed). A part that could not be moved stays listed, so the failed
   run's own `manifest-<run_id>.json` names what it left behind (ADR-0002), with a warning;
3. the checkpoint says what happened (`StateStore.withdraw_chunk_run`): the chunk run becomes
   `interrupted` — never resumed, never continued, so the next run starts clean — and each
   completed task `failed` with the gate's reason and where its parts went.

The runners call `withdraw_windows` and let the error reach their finalize; this module
never writes a manifest, a cursor or progression.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from rivet_core.destination import Destination
from rivet_core.errors import best_effort
from rivet_core.manifest import quarantine_key, quarantine_object
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore

log = logging.getLogger("rivet.withdraw")


def withdraw_windows(summary: RunSummary, state: StateStore, dest: Destination, *, reason: str,
                     chunk_run_id: str | None, keep: Collection[str] = ()) -> int:
    """Quarantine the run's parts (but `keep`), drop them from the run, record it in the
    checkpoint (module docstring). Returns how many parts were moved. Never raises for a
    failed move or checkpoint write: those are warnings (nothing is published either way)."""
    run_id = summary.run_id
    where = quarantine_key(run_id, "")
    remaining, moved = [], []
    for part in summary.manifest_parts:
        if part.path in keep:
            remaining.append(part)
        elif quarantine_object(dest, run_id, part.path):
            moved.append(part)
        else:
            remaining.append(part)
            summary.add_warning(f"part '{part.path}' of the withdrawn run could not be quarantined "
                                "and is still at the destination (listed in the run's own failed manifest)")
    summary.manifest_parts[:] = remaining
    summary.files_committed -= len(moved)
    summary.files_produced -= len(moved)
    summary.bytes_written -= sum(p.size_bytes for p in moved)
    note = (f"{reason} — {len(moved)} part(s) of the windows already written moved to '{where}'; "
            "nothing was published")
    summary.journal.record("Warning", context="chunk_withdraw", message=note)
    log.warning("export '%s': %s", summary.export_name, note)
    if chunk_run_id is not None:
        # The parts are gone from the prefix either way.
        with best_effort("withdraw the checkpoint", warn=summary.add_warning,
                         message="checkpoint not updated for the withdrawn run: {reason}"):
            state.withdraw_chunk_run(chunk_run_id, f"withdrawn: {note}")
    return len(moved)


__all__ = ["withdraw_windows"]
