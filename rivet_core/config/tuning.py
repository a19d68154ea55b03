"""Tuning profiles and the merged, concrete tuning an export runs with.

docs/rivet-compat.md "Tuning and batch sizing": `source.tuning` and `exports[].tuning` merge field by field (export wins);
the profile is explicit > `source.environment` default (`local`→fast, others→balanced) >
`balanced`; explicit fields override the profile's base values. The result is a frozen
`ResolvedTuning` with no optional knobs left, so the engine never re-derives defaults.

Pacing between batches: `balanced` and `safe` run the adaptive source governor
(`rivet_core/pipeline/resources/governor.py`), which pauses between `throttle_floor_ms` and
`throttle_ceiling_ms` by measured source pressure; an explicit `throttle_ms` (source or
export tuning) turns it off and pauses exactly that long after every batch — the user asked
for a fixed pace, so a profile must not override it. `fast` does not pace at all.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

Profile = Literal["fast", "balanced", "safe"]
OnBatchMemoryExceeded = Literal["warn", "fail", "auto_shrink"]

#: Every tuning knob; the "misplaced tuning" guard (docs/rivet-compat.md "Config load order", step 3) uses this list.
TUNING_FIELDS: tuple[str, ...] = (
    "profile", "batch_size", "batch_size_memory_mb", "throttle_ms", "statement_timeout_s",
    "max_retries", "retry_backoff_ms", "lock_timeout_s", "memory_threshold_mb",
    "max_batch_memory_mb", "on_batch_memory_exceeded", "adaptive", "min_parallel", "max_value_mb",
    "throttle_floor_ms", "throttle_ceiling_ms",
)


@dataclass(frozen=True)
class ResolvedTuning:
    """Concrete tuning values for one export (all defaults applied)."""

    profile: Profile = "balanced"
    #: Static fetch window in rows; used when `batch_size_memory_mb` is None.
    batch_size: int = 10_000
    #: Memory target per fetched batch; rows = mb·2^20 / est_row_bytes clamped [1k, 150k].
    batch_size_memory_mb: int | None = 32
    #: Fixed pause after every batch; used only when `governor` is off (an explicit key).
    throttle_ms: int = 0
    #: The adaptive source governor paces the read (off when `throttle_ms` is explicit).
    governor: bool = True
    #: The governor's pause on an idle source and under full pressure.
    throttle_floor_ms: int = 0
    throttle_ceiling_ms: int = 500
    #: Under full pressure the governor pauses at least this many times the batch's own
    #: read-and-write time (1: the export reads at most half the time; `safe` 3: a quarter).
    #: A profile constant, not a config key: `throttle_ceiling_ms` alone cannot slow a batch
    #: that takes seconds (docs/benchmarks.md "Source governor").
    throttle_duty: float = 1.0
    statement_timeout_s: int = 300
    max_retries: int = 3
    retry_backoff_ms: int = 2_000
    lock_timeout_s: int = 30
    memory_threshold_mb: int = 4_096
    max_batch_memory_mb: int | None = None
    on_batch_memory_exceeded: OnBatchMemoryExceeded = "warn"
    adaptive: bool = False
    min_parallel: int = 1
    max_value_mb: int = 256


PROFILE_DEFAULTS: dict[str, ResolvedTuning] = {
    "fast": ResolvedTuning(
        profile="fast", batch_size=50_000, batch_size_memory_mb=64, throttle_ms=0,
        governor=False, throttle_ceiling_ms=0, statement_timeout_s=0, max_retries=1, retry_backoff_ms=1_000, lock_timeout_s=0,
        memory_threshold_mb=0,
    ),
    "balanced": ResolvedTuning(),
    "safe": ResolvedTuning(
        profile="safe", batch_size=2_000, batch_size_memory_mb=None, throttle_floor_ms=50,
        throttle_ceiling_ms=2_000, throttle_duty=3.0, statement_timeout_s=120, max_retries=10, retry_backoff_ms=5_000, lock_timeout_s=10,
        memory_threshold_mb=2_048,
    ),
}


def resolve_tuning(
    source_tuning: dict[str, Any] | None,
    export_tuning: dict[str, Any] | None,
    environment: str | None = None,
) -> ResolvedTuning:
    """Merge source and export tuning dicts (only explicitly-set keys) over a profile.

    An explicit `batch_size` disables memory-derived sizing, because the user asked for a
    fixed fetch window; an explicit `batch_size_memory_mb` keeps it. An explicit
    `throttle_ms` turns the governor off (a fixed pace); an explicit floor or ceiling turns
    it on (also under `fast`).
    """
    merged: dict[str, Any] = {}
    for layer in (source_tuning or {}, export_tuning or {}):
        merged.update({k: v for k, v in layer.items() if v is not None})
    profile = merged.pop("profile", None) or (
        "fast" if environment == "local" else "balanced"
    )
    base = PROFILE_DEFAULTS[profile]
    if "batch_size" in merged and "batch_size_memory_mb" not in merged:
        merged["batch_size_memory_mb"] = None
    if "throttle_ms" in merged:
        merged["governor"] = False
    elif "throttle_floor_ms" in merged or "throttle_ceiling_ms" in merged:
        merged["governor"] = True
        if base.throttle_ceiling_ms == 0 and "throttle_ceiling_ms" not in merged:
            merged["throttle_ceiling_ms"] = PROFILE_DEFAULTS["balanced"].throttle_ceiling_ms
    return replace(base, **merged)


#: Arrow-type byte estimates used to turn a memory target into a row count (docs/rivet-compat.md "Tuning and batch sizing").
def batch_rows_for_memory(est_row_bytes: int, memory_mb: int) -> int:
    """Rows per batch for a memory target, clamped to [1,000, 150,000]."""
    rows = (memory_mb * 1024 * 1024) // max(est_row_bytes, 1)
    return max(1_000, min(150_000, rows))


def merged_tuning_error(export_name: str, export_tuning: Any, source_tuning: Any) -> str | None:
    """batch_size and batch_size_memory_mb are exclusive on each level and once merged.

    `export_tuning` / `source_tuning` are the `tuning:` blocks (anything with `as_dict()`,
    or None): this module sits below the config models, so it never imports them."""
    label = f"export '{export_name}'"
    own = export_tuning.as_dict() if export_tuning else {}
    if "batch_size" in own and "batch_size_memory_mb" in own:
        return (
            f"{label}: tuning.batch_size and tuning.batch_size_memory_mb are mutually "
            "exclusive — keep one"
        )
    inherited = source_tuning.as_dict() if source_tuning else {}
    if "batch_size" in inherited and "batch_size_memory_mb" in inherited:
        return None  # reported once, on the source
    merged = {**inherited, **own}
    if "batch_size" in merged and "batch_size_memory_mb" in merged:
        origin = {
            k: "exports[].tuning" if k in own else "source.tuning"
            for k in ("batch_size", "batch_size_memory_mb")
        }
        return (
            f"{label}: batch_size (from {origin['batch_size']}) and batch_size_memory_mb (from "
            f"{origin['batch_size_memory_mb']}) are mutually exclusive once merged — set only "
            "one of them across source.tuning and the export's tuning"
        )
    return None
