"""Would the export's steady-state query use an index on its access column? (EXPLAIN)

The question `check` asks is not "does an index exist" (the catalog answers that) but
"will the query the engine actually runs seek instead of scanning". So the probe
EXPLAINs the export's own base query wrapped the way the modes wrap it — `SELECT * FROM
(<base>) AS _rivet WHERE _rivet.<col> > %s` — with a real value of the column bound
(the first row's; a value of the right type is all the planner needs).

Small tables make planners prefer a sequential scan even when an index would do, which
would make the answer depend on the table's size rather than on its indexes. The probe
therefore asks each engine's dialect (`SourceDialect.index_access`) for its
*index-capable* plan:

- PostgreSQL: `SET LOCAL enable_seqscan = off` for the EXPLAIN (restored afterwards), so
  a Seq Scan in the plan means no usable index exists;
- MySQL/MariaDB: the `possible_keys` column (indexes usable for the predicate), which does
  not depend on the optimizer's cost choice;
- SQLite: `EXPLAIN QUERY PLAN` says `SEARCH … USING … INDEX`/`PRIMARY KEY` or `SCAN`.
"""

from __future__ import annotations

from rivet_core.introspect.session import raw_rows
from rivet_core.source.base import SourceSession, strip_sql
from rivet_core.source.dialect import IndexAccess

#: The answer: `index_used` True (the predicate can use an index), False (it cannot) or
#: None (could not tell), and a `detail` for the report.
AccessProbe = IndexAccess


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
    return session.dialect.index_access(session, sql, value)
