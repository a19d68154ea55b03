"""The schema-drift facade (docs/adr/0001-write-ordering-facades.md, "schema drift"): detect → policy → store, in one place.

Compares the export's output schema (name → type string, order-insensitive, internal
`_rivet_*` columns stripped) with the stored baseline:
- first run: store the baseline, no drift (`schema_changed = False`);
- `warn` (default): WARN lines listing the changes, store the new baseline, continue;
- `continue`: store silently;
- `fail`: keep the old baseline (the next run detects it again) and raise
  `SchemaDriftError` (exit 4).
It runs BEFORE any part is published (our single runner checks the staged schema), so
`fail` leaves the destination untouched — stricter than Rivet, which uploaded first.
Tracking errors are warnings and still mark the gate as run (`schema_changed = False`).

This module is the only writer of a run's drift verdict (`schema_changed`, `schema_changes`,
`schema_gate`; tests/pipeline/test_facade_only_writers.py enforces it):
- `check_schema_drift` — the gate itself (`schema_gate = "checked"`);
- `record_gated_upstream` — a step of a run whose gate already ran earlier in the same run
  (a resumed chunk run: at its start; a chunk finalize: in each window batch before its
  window was claimed) says so explicitly (`schema_gate = "upstream: <where>"`). Setting
  `schema_changed = False` by hand instead would satisfy nothing: the invariant backstop
  (summary.py) reads `schema_gate`, so a runner that skips the gate still fails loudly;
- `merge_drift_verdicts` — a run made of unit runs (a ranged time-partition run) reports the
  first drift any unit found.
"""

from __future__ import annotations

from rivet_core.errors import SchemaDriftError, best_effort
from rivet_core.lazy_modules import pa
from rivet_core.runrecord.summary import RunSummary
from rivet_core.state import StateStore


def schema_columns(schema: pa.Schema) -> list[dict[str, str]]:
    return [{"name": f.name, "type": str(f.type)} for f in schema if not f.name.startswith("_rivet_")]


def diff_columns(old: list[dict[str, str]], new: list[dict[str, str]]) -> dict[str, list]:
    old_map = {c["name"]: c["type"] for c in old}
    new_map = {c["name"]: c["type"] for c in new}
    return {
        "added": [f"{n} ({t})" for n, t in new_map.items() if n not in old_map],
        "removed": [n for n in old_map if n not in new_map],
        "type_changed": [[n, old_map[n], t] for n, t in new_map.items() if n in old_map and old_map[n] != t],
    }


def check_schema_drift(state: StateStore, summary: RunSummary, schema: pa.Schema, policy: str) -> None:
    """Apply the drift policy for this run's schema; see the module docstring."""
    summary.schema_gate = "checked"
    current = schema_columns(schema)
    baseline = None
    with best_effort("schema baseline read", warn=summary.add_warning,  # drift tracking is advisory
                     message="schema drift tracking unavailable: {reason}") as attempt:
        baseline = state.get_schema_baseline(summary.export_name)
    if attempt.failed:
        summary.schema_changed = False
        return
    if baseline is None:
        _store(state, summary, current)
        summary.schema_changed = False
        return
    changes = diff_columns(baseline, current)
    if not any(changes.values()):
        summary.schema_changed = False
        return
    summary.schema_changed = True
    summary.schema_changes = changes
    summary.journal.record("SchemaChanged", **changes)
    text = (f"{len(changes['added'])} added, {len(changes['removed'])} removed, "
            f"{len(changes['type_changed'])} retyped")
    detail = "; ".join(
        [f"added {a}" for a in changes["added"]] + [f"removed {r}" for r in changes["removed"]]
        + [f"{n}: {o} -> {t}" for n, o, t in changes["type_changed"]])
    if policy == "fail":
        raise SchemaDriftError(
            f"schema drift detected for export '{summary.export_name}': {text} ({detail}). "
            "The baseline is kept; nothing was published. Fix the source, or set "
            "on_schema_drift: warn to accept the new schema.")
    if policy == "warn":
        summary.add_warning(f"schema drift: {text} ({detail})")
    _store(state, summary, current)


def record_gated_upstream(summary: RunSummary, where: str) -> None:
    """Record that this run's drift gate ran upstream, at `where` (module docstring): no drift
    is judged here, and none was left pending — a drift there either failed the run (`fail`)
    or was accepted and stored as the new baseline."""
    if summary.schema_gate is not None:
        return  # judged here already: keep that verdict
    summary.schema_gate = f"upstream: {where}"
    summary.schema_changed = False


def merge_drift_verdicts(target: RunSummary, units: list[RunSummary]) -> None:
    """The verdict of a run made of unit runs: the first unit that found a drift, else the
    first judged unit's; nothing when no unit was judged."""
    judged = [s for s in units if s.schema_gate is not None]
    if not judged:
        return
    changed = next((s for s in judged if s.schema_changed), None)
    target.schema_gate = judged[0].schema_gate
    target.schema_changed = changed is not None
    target.schema_changes = changed.schema_changes if changed else judged[0].schema_changes
    target.schema_fingerprint = judged[0].schema_fingerprint


def _store(state: StateStore, summary: RunSummary, columns: list[dict[str, str]]) -> None:
    with best_effort("schema baseline write", warn=summary.add_warning):
        state.put_schema_baseline(summary.export_name, columns)
