"""PostgreSQL source: the session (`session`), its read paths (`binary`, `adbc`; `copy` holds what they share),
the type mapping (`types`) and the optional C decoder `_pgbinary` built from `_pgbinary.c`.

`rivet_core.source.open_source` is the entry point; nothing is re-exported here so that
importing one module of the package does not load the others.
"""
