"""The runners' shape (docs/architecture.md, the `rivet_core/pipeline/` row): each runner builds on `ExportRun`
(rivet_core/pipeline/single/job.py) at most two classes deep — what a chunk-task step shares
with the others is held as services (chunked/planning.py, chunked/checkpoint.py), not
inherited through a chain —, `--resume`'s gate has one caller, `ExportRun.run`, and a batch
reaches a staged part file only through `stream_to_parts` (pipeline/staging/stream.py).

Read from the code itself (the imported classes and the AST of rivet_core/), so a new
subclass or a second gate call fails here with its name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rivet_core.api import ExportRun

ROOT = Path(__file__).resolve().parents[2] / "rivet_core"


def _import_every_runner() -> None:
    """Import the modules that define runners, so `__subclasses__` sees every one."""
    import rivet_core.pipeline.buckets.run  # noqa: F401
    import rivet_core.pipeline.chunked.reconcile  # noqa: F401
    import rivet_core.pipeline.chunked.tasks  # noqa: F401
    import rivet_core.pipeline.time_range  # noqa: F401


def _depths(cls: type, depth: int = 0) -> dict[str, int]:
    found = {f"{cls.__module__}.{cls.__qualname__}": depth}
    for sub in cls.__subclasses__():
        found.update(_depths(sub, depth + 1))
    return found


def test_no_runner_class_lies_more_than_two_levels_below_export_run() -> None:
    _import_every_runner()
    depths = _depths(ExportRun)
    too_deep = {name: depth for name, depth in depths.items() if depth > 2}
    assert too_deep == {}, f"runner classes deeper than two below ExportRun: {too_deep}"
    assert depths["rivet_core.pipeline.chunked.tasks.ChunkWindowRun"] == 2
    assert depths["rivet_core.pipeline.chunked.tasks.ChunkFinalizeRun"] == 2


def _calls_of(name: str, under: Path = ROOT) -> list[str]:
    """`path:line` of every call of `name` (a bare name or an attribute) under `under`."""
    found = []
    for path in sorted(under.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if called == name:
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return found


def test_the_resume_gate_is_called_from_export_run_run_alone() -> None:
    calls = _calls_of("gate_resume")
    assert len(calls) == 1 and calls[0].startswith("rivet_core/pipeline/single/job.py:"), calls


def test_a_batch_reaches_a_staged_part_only_through_stream_to_parts() -> None:
    """The single extract, a chunk window, a time range's read and a CDC drain share the one
    loop; the range's window splitter (time_range.py `WindowSplitter`) and the CDC drain's
    per-table stager (cdc/stage.py `TableStager`, behind `TableFanout`) are sinks that loop
    writes to — each the one place its own cut rule writes a part file."""
    writes = [c.split(":")[0] for c in _calls_of("write_batch", ROOT / "pipeline")]
    sinks = ["rivet_core/pipeline/cdc/stage.py", "rivet_core/pipeline/time_range.py"]
    assert sorted(set(writes)) == [sinks[0], "rivet_core/pipeline/staging/stream.py", sinks[1]], writes
    assert writes.count(sinks[1]) == 1, writes
