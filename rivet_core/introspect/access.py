"""Would the export's steady-state query use an index on its access column? (EXPLAIN)

The question `check` asks is not "does an index exist" (the catalog answers that) but
"will the query the engine actually runs seek instead of scanning". So the probe
EXPLAINs the export's own base query wrapped the way the modes wrap it — `SELECT * FROM
(<base>) AS _rivet WHERE _rivet.<col> > %s` — with a real value of the column bound
(the first row's; a value of the right type is all the planner needs).

Small tables make planners prefer a sequential scan even when an index would do, which
would make the answer depend on the table's size rather than on its indexes. The probe
therefore asks each engine for its *index-capable* plan:

- PostgreSQL: `SET LOCAL enable_seqscan = off` for the EXPLAIN (restored afterwards), so
  a Seq Scan in the plan means no usable index exists;
- MySQL/MariaDB: the `possible_keys` column (indexes usable for the predicate), which does
  not depend on the optimizer's cost choice;
- SQLite: `EXPLAIN QUERY PLAN` says `SEARCH … USING … INDEX`/`PRIMARY KEY` or `SCAN`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rivet_core.introspect.session import raw_query, raw_rows
from rivet_core.source.base import SourceSession, strip_sql

_PG_INDEX_NODES = {"Index Scan", "Index Only Scan", "Bitmap Index Scan"}


@dataclass(frozen=True)
class AccessProbe:
    #: True: the predicate can use an index; False: it cannot; None: could not tell.
    index_used: bool | None
    detail: str


def probe_access(session: SourceSession, base_sql: str, column: str) -> AccessProbe:
    """EXPLAIN the `column > value` predicate over the export's base query."""
    base = strip_sql(base_sql)
    col = f"_rivet.{session.quote_ident(column)}"
    sample = raw_rows(session, f"SELECT {col} FROM ({base}) AS _rivet WHERE {col} IS NOT NULL LIMIT 1",
                      tolerate=True)
    if sample is None:
        return AccessProbe(None, f"cannot read column '{column}' from the export's query")
    if not sample:
        return AccessProbe(None, "the source has no rows yet: nothing to EXPLAIN against")
    value = sample[0][0]
    escaped = base.replace("%", "%%")
    sql = f"SELECT * FROM ({escaped}) AS _rivet WHERE {col.replace('%', '%%')} > %s"
    if session.engine == "postgres":
        return _pg(session, sql, value)
    if session.engine == "mysql":
        return _mysql(session, sql, value)
    return _sqlite(session, sql, value)


def _pg(session: SourceSession, sql: str, value: Any) -> AccessProbe:
    raw_rows(session, "SET LOCAL enable_seqscan = off")
    try:
        rows = raw_rows(session, f"EXPLAIN (FORMAT JSON) {sql}", [value], tolerate=True)
    finally:
        raw_rows(session, "SET LOCAL enable_seqscan = on")
    if not rows:
        return AccessProbe(None, "EXPLAIN failed for the export's query")
    doc = rows[0][0]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    nodes = list(_pg_nodes(doc[0]["Plan"]))
    used = [n for n in nodes if n.get("Node Type") in _PG_INDEX_NODES]
    if used:
        names = sorted({str(n.get("Index Name")) for n in used})
        return AccessProbe(True, f"index scan ({', '.join(names)})")
    scans = sorted({str(n.get("Relation Name")) for n in nodes if n.get("Node Type") == "Seq Scan"})
    return AccessProbe(False, f"sequential scan of {', '.join(scans) or 'the query'} (no usable index)")


def _pg_nodes(node: dict[str, Any]) -> Any:
    yield node
    for child in node.get("Plans", []) or []:
        yield from _pg_nodes(child)


def _mysql(session: SourceSession, sql: str, value: Any) -> AccessProbe:
    result = raw_query(session, f"EXPLAIN {sql}", [value], tolerate=True)
    if not result or "possible_keys" not in result[0]:
        return AccessProbe(None, "EXPLAIN failed for the export's query")
    names, rows = result
    keys = {str(r[names.index("possible_keys")]) for r in rows if r[names.index("possible_keys")]}
    if keys:
        return AccessProbe(True, f"usable index ({', '.join(sorted(keys))})")
    return AccessProbe(False, "full table scan (no usable index)")


def _sqlite(session: SourceSession, sql: str, value: Any) -> AccessProbe:
    rows = raw_rows(session, f"EXPLAIN QUERY PLAN {sql}", [value], tolerate=True)
    if not rows:
        return AccessProbe(None, "EXPLAIN QUERY PLAN failed for the export's query")
    details = [str(r[-1]) for r in rows]
    if any("USING" in d and ("INDEX" in d or "PRIMARY KEY" in d) for d in details):
        return AccessProbe(True, "; ".join(details))
    return AccessProbe(False, "; ".join(details) + " (no usable index)")
