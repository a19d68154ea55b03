"""`rivet apply <config.yaml>`: Rivet's wave-ordered run of a whole config (its
src/pipeline/run.rs `run_waves`), with `--resume` skipping exports already complete.

The exports run in ascending `wave:` order, those without a `wave:` last — one after the
other, as every run of this tool does (docs/rivet-compat.md "Rivet's CLI matrix"), so
`parallel_safe` changes nothing here. Under `--resume` an export whose destination already
holds `_SUCCESS` is skipped (re-running it would hit the resume gate, pipeline/resume_gate.py),
and the others run with `--resume`, so a checkpointed chunked export continues where it
stopped. Rivet's `--pool N` (a work-stealing pool of N concurrent exports) and `--split` are
refused with the reason: exports never run concurrently here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.destination import open_destination
from rivet_core.manifest.layout import SUCCESS_KEY
from rivet_core.unit.resolve import destination_spec

UNSCHEDULED = "unscheduled"


def is_config_file(path: str) -> bool:
    """Rivet's rule: a `.yaml`/`.yml` argument is a config to run by waves, anything else a plan."""
    return Path(path).suffix.lower() in (".yaml", ".yml")


def waves(exports: list[ExportConfig]) -> list[tuple[str, list[ExportConfig]]]:
    """(label, exports) in ascending `wave:` order; exports without one last, in config order."""
    numbered = sorted({e.wave for e in exports if e.wave is not None})
    out = [(str(w), [e for e in exports if e.wave == w]) for w in numbered]
    rest = [e for e in exports if e.wave is None]
    return out + ([(UNSCHEDULED, rest)] if rest else [])


def is_complete(config: RivetConfig, export: ExportConfig) -> bool:
    """Does the export's destination (templated as a run today would resolve it) hold `_SUCCESS`?
    Read-only: a local prefix that does not exist is not created."""
    spec = destination_spec(config, export, datetime.now(UTC))
    if spec.kind == "stdout":
        return False
    return open_destination(spec, config.config_dir, create=False).head(SUCCESS_KEY) is not None


POOL_REFUSAL = ("--pool runs a config's exports as a pool of concurrent exports, and this rivet runs the exports "
                "of one command one after the other — drop --pool (and --split) to apply the config wave by wave, "
                "or run one `rivet run -e <export>` process per export, or run them as assets of the orchestrator "
                "integration (docs/rivet-compat.md \"Rivet's CLI matrix\")")

__all__ = ["POOL_REFUSAL", "UNSCHEDULED", "is_complete", "is_config_file", "waves"]
