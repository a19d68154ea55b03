"""The chunk-task protocol in Dagster's words: what a user of the Dagster layer reads.

The core (`rivet_core.api`: `ChunkWindowRun`, `ChunkFinalizeRun`, `plan_chunk_tasks`,
`reconcile_chunks`, `chunk_task_problem`) speaks of windows, tasks, batches and a finalize;
here they are what the Dagster layer makes of them — a window is a partition of the
`<export>_chunks` asset, a batch is a partition run, planning is the config's
`<config file stem>_chunk_planner` sensor and the finalize is the `<export>_manifest` asset.
`dagster_words` is the core's
`Wording`: every refusal and notice of the protocol is worded here, from the facts the core
hands over, so the messages name what the user can click on — windows by their readable
partition keys (`rivet_dagster/partitions.py`), not the core's padded window keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rivet_core import api
from rivet_dagster.partition_keys import readable_window_keys


def _windows_missing(f: Mapping[str, Any]) -> str:
    return (f"export '{f['export']}': {f['missing']} of {f['total']} chunk window(s) not materialized "
            f"(chunk run {f['run_id']}) — nothing was published; materialize partition(s) {f['shown']} of the "
            f"chunk asset, then `{f['export']}_manifest` again" + (f" ({f['detail']})" if f["detail"] else "")
            + ". A window is a partition once the config's `…_chunk_planner` sensor has registered it: run the "
              "sensor under `dagster dev`, `dg dev` or a dagster-daemon (`dg launch` alone runs no sensor)")


_WORDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "moving_windows": lambda f: (
        f"export '{f['export']}': {f['knob']} windows depend on the table's current extent and change "
        "as it grows, so they cannot be Dagster partitions (a partition key must name the same rows "
        "forever) — use chunk_column + chunk_size (grid-aligned), chunk_by_days or chunk_by_key, "
        "or run this export with the CLI"),
    "keyset_incremental": lambda f: (
        f"export '{f['export']}': keyset_incremental is a CLI mode; as Dagster partitions a keyset "
        "export already grows through its open last window, which the planner sensor re-requests — "
        "remove keyset_incremental for Dagster"),
    "windows_missing": _windows_missing,
    "busy": lambda f: (
        f"export '{f['export']}': window {f['window']} is {f['status']}{f['owner']} and cannot be "
        f"claimed by {f['worker']} (chunk run {f['run_id']}) — wait for that run, or cancel it and "
        "materialize the partition again"),
    "plan_changed": lambda f: (
        f"export '{f['export']}': the config now plans {f['plan_hash']} but the chunk run "
        f"{f['run_id']} in progress was planned as {f['run_plan_hash']} (the query, chunk column or chunk "
        "shape changed), so its partitions no longer name the same rows. Restore the old settings, or "
        f"clear the checkpoint with `rivet state reset-chunks -c {f['config']} -e {f['export']}` (the next "
        "planner tick starts a fresh chunk run)"),
    "unknown_windows": lambda f: (
        f"export '{f['export']}': partition(s) {f['keys']} are not windows of chunk "
        f"run {f['run_id']} (registered by an older plan?) — let the config's `…_chunk_planner` "
        "sensor register the current windows"),
    "window_parts_lost": lambda f: (
        f"export '{f['export']}': window {f['window']} lost its part(s) at the "
        "destination while the manifest was being built — materialize that partition again"),
    "finalized_elsewhere": lambda f: (
        f"export '{f['export']}': chunk run {f['run_id']} is {f['status']} — another "
        f"`{f['export']}_manifest` run finalized it (or a reset removed it) meanwhile; this run "
        "published nothing"),
    "no_chunk_run": lambda f: (
        f"export '{f['export']}': no chunk run recorded — let the config's `…_chunk_planner` sensor "
        "plan the windows and materialize them first"),
    "finalize_due_again": lambda f: (
        f"export '{f['export']}': chunk run {f['run_id']} completed every window but "
        f"{f['why']}; its windows are carried into a new chunk run and the manifest "
        "is requested again"),
}


def dagster_words(kind: str, facts: Mapping[str, Any]) -> str | None:
    """The core's `Wording` for Dagster: its text for `kind`, or None (the core's neutral
    text already reads right, e.g. `not_chunked`)."""
    word = _WORDS.get(kind)
    return readable_window_keys(word(facts)) if word is not None else None


def dagster_chunk_problem(export: api.ExportConfig) -> str | None:
    """Why a chunked export cannot be Dagster partitions, or None. Decided from the config
    alone (no source probe), so a code location refuses it at load time."""
    return api.chunk_task_problem(export, dagster_words)
