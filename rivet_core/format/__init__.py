"""Output formats: Parquet and CSV part writers, and size-based part rotation.

Public API (other packages code against these names):
`WriterOptions`, `FormatWriter`, `open_writer`, `PartRotator`, `StagedPart`, `file_extension`.

I1 (Finalize Before Write): `FormatWriter.finish()` / `PartRotator.finish()` are the finalize
step; only files they produced may be handed to a destination.
"""

from __future__ import annotations

from rivet_core.format.base import FormatWriter, WriterOptions, file_extension
from rivet_core.format.factory import open_writer
from rivet_core.format.rotation import PartRotator, StagedPart

__all__ = [
    "FormatWriter",
    "PartRotator",
    "StagedPart",
    "WriterOptions",
    "file_extension",
    "open_writer",
]
