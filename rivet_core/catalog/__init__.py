"""The source catalog, one function per question: which tables exist, their columns, keys
and indexes, and their row statistics (`tables`).

The chunk planner (`rivet_core/chunks/`), the row estimator
(`rivet_core/introspect/estimate.py`), `rivet init` and `rivet check`
(`rivet_core/introspect/`, `rivet_core/ops/`) all ask here; the engine-specific SQL is
the session's dialect's (`rivet_core/source/dialect.py`).
"""

from rivet_core.catalog.tables import (
    IndexInfo,
    TableInfo,
    list_indexes,
    list_tables,
    row_estimate,
    table_exists,
    table_info,
)

__all__ = ["IndexInfo", "TableInfo", "list_indexes", "list_tables", "row_estimate",
           "table_exists", "table_info"]
