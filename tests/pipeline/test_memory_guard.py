"""Memory guards: a batch over max_batch_memory_mb warns or fails as configured."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import DataIntegrityError
from rivet_core.pipeline.resources.memory_guard import MemoryGuard, current_rss_mb

BIG = pa.record_batch({"s": pa.array(["x" * 1024] * 3000)})  # ~3 MB


def test_a_batch_over_the_cap_fails_the_run_when_configured_to_fail():
    guard = MemoryGuard(ResolvedTuning(max_batch_memory_mb=1, on_batch_memory_exceeded="fail",
                                       memory_threshold_mb=0), "orders")
    with pytest.raises(DataIntegrityError, match=r"over max_batch_memory_mb=1 — set tuning.batch_size to about \d+"):
        guard.check(BIG)


def test_a_batch_over_the_cap_warns_once_when_configured_to_warn(caplog):
    guard = MemoryGuard(ResolvedTuning(max_batch_memory_mb=1, memory_threshold_mb=0), "orders")
    with caplog.at_level(logging.WARNING, logger="rivet.memory"):
        guard.check(BIG)
        guard.check(BIG)
    assert sum("max_batch_memory_mb" in r.message for r in caplog.records) == 1


def test_a_batch_under_the_cap_passes_silently(caplog):
    guard = MemoryGuard(ResolvedTuning(max_batch_memory_mb=64, memory_threshold_mb=0), "orders")
    with caplog.at_level(logging.WARNING, logger="rivet.memory"):
        guard.check(BIG)
    assert not caplog.records


def test_current_rss_is_read_from_proc():
    assert current_rss_mb() > 10
