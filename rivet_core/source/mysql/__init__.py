"""MySQL/MariaDB source: the session (`session`), its read paths (`binary`, `raw`), the type
mapping (`types`) and the optional C framer `_mysqlframe` built from `_mysqlframe.c`.

`rivet_core.source.open_source` is the entry point; nothing is re-exported here so that
importing one module of the package does not load the others.
"""
