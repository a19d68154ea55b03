"""The names a single-unit run gives its parts (docs/rivet-compat.md "File names and run ids").

`{export}_{YYYYMMDD_HHMMSS_mmm}.{ext}`, `_part{N}` (N from 0) when `max_file_size` rotated the
output, under the prefix's `data/` folder (`layout.data_key`; at the root with `layout: rivet`). A stem whose names already
exist at the destination (two runs in the same millisecond) gets a short random suffix, so
no run ever overwrites another run's part.

Why a module of its own: the stem is chosen by the publish step (facade/publish.py) — or,
when the destination uploads parts while they are written (`Destination.begin_early_upload`),
already when the extract starts (extract.py), since an upload in flight has its key.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from rivet_core.destination import Destination
from rivet_core.manifest import data_key


def part_stem(export_name: str, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{export_name}_{now.strftime('%Y%m%d_%H%M%S')}_{now.microsecond // 1000:03d}"


def part_names(stem: str, ext: str, n: int) -> list[str]:
    """File names of `n` parts: `{stem}.{ext}` alone, else `{stem}_part{N}.{ext}`."""
    return [f"{stem}.{ext}"] if n == 1 else [f"{stem}_part{i}.{ext}" for i in range(n)]


def free_stem(dest: Destination, stem: str, ext: str, n: int | None, layout: str = "data") -> str:
    """`stem`, or `stem` with a random suffix when one of its part keys exists at `dest`.
    `n` None (the part count is not known yet): the names every count starts with."""
    names = part_names(stem, ext, n) if n is not None else [*part_names(stem, ext, 1), *part_names(stem, ext, 2)]
    if dest.supports_manifest and any(dest.head(data_key(name, layout)) is not None for name in names):
        return f"{stem}_{secrets.token_hex(3)}"
    return stem


__all__ = ["free_stem", "part_names", "part_stem"]
