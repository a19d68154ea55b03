"""`merge_on` keys must identify one row: checked on the run's parts before any table commit,
and on the table by a full verification.

A MERGE matches a table row to a source row by equal keys. A NULL key never equals anything,
so a row with one is inserted again by every run that exports it (delta-rs's MERGE and the
Iceberg delete-then-append alike): the table keeps each version. A key twice in one run
inserts two rows with that key, and every later MERGE touching it is refused by delta-rs
("matched a target row with multiple source rows") — forever. Both come from a `merge_on`
that is not the source's primary or unique key, so the run is refused before the table is
created or changed, with that fix; the cursor does not move (finalize.py fails the run on a
table-commit error before its manifest).
"""

from __future__ import annotations

from typing import Any

from rivet_core.lazy_modules import pa
from rivet_core.tableformat.errors import TableCommitError

_FIX = ("merge_on must be the source's primary or unique key, with its columns NOT NULL — fix the source's rows "
        "or name the real key under merge_on")


def key_problem(keys: list[str], rows: pa.Table) -> str | None:
    """What makes `rows` (at least the `keys` columns) unfit for a MERGE on `keys`: NULL keys
    or a key more than once, with a count and an example; None when every key is whole and once."""
    import pyarrow.compute as pc

    if not rows.num_rows:
        return None
    nulls = None
    for k in keys:
        missing = pc.is_null(rows.column(k))
        nulls = missing if nulls is None else pc.or_(nulls, missing)
    null_count = int(pc.sum(nulls).as_py() or 0)
    if null_count:
        example = rows.filter(nulls).slice(0, 1).select(keys).to_pylist()[0]
        return f"{null_count} row(s) with a NULL key (e.g. {_render(example)})"
    counts = rows.select(keys).group_by(keys).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if repeated.num_rows:
        first = repeated.slice(0, 1).to_pylist()[0]
        return (f"{repeated.num_rows} key(s) on more than one row (e.g. {_render(first)}, "
                f"{first['count_all']} rows)")
    return None


def _render(row: dict[str, Any]) -> str:
    return ", ".join(f"{k}={'NULL' if v is None else v}" for k, v in row.items() if k != "count_all")


def refuse_unfit_keys(export: str, keys: list[str], rows: pa.Table) -> None:
    """Raise `TableCommitError` (exit 3) when this run's rows cannot be merged on `keys`."""
    problem = key_problem(keys, rows)
    if problem is not None:
        raise TableCommitError(
            f"export '{export}': merge_on {keys} must identify one row, but this run's rows hold {problem} — "
            f"nothing was committed and the cursor did not move; {_FIX}")


def table_key_problem(export: str, keys: list[str], rows: pa.Table, where: str) -> str | None:
    """The verification's message for a table whose `merge_on` keys are not unique."""
    problem = key_problem(keys, rows)
    if problem is None:
        return None
    return (f"the table at {where} holds {problem} on merge_on {keys} of export '{export}' — every later MERGE "
            f"on such a key fails or duplicates it; {_FIX}, then run with --full-refresh")


__all__ = ["key_problem", "refuse_unfit_keys", "table_key_problem"]
