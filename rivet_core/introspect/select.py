"""Which tables `rivet init --schema S --include GLOB --exclude GLOB` scaffolds.

Pure: a table is selected when it matches at least one include glob (no include = all) and
no exclude glob. Globs are shell-style (`*`, `?`, `[abc]`) and case-sensitive, matched on the
bare table name — the same rule whether the catalog is PostgreSQL, MySQL or SQLite, so a
config generated on one engine selects the same tables on another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase


def select_tables(tables: Iterable[str], include: Sequence[str] = (),
                  exclude: Sequence[str] = ()) -> list[str]:
    """`tables` filtered by the globs, in their original order, without duplicates."""
    seen: set[str] = set()
    out: list[str] = []
    for table in tables:
        if table in seen:
            continue
        if include and not any(fnmatchcase(table, g) for g in include):
            continue
        if any(fnmatchcase(table, g) for g in exclude):
            continue
        seen.add(table)
        out.append(table)
    return out
