"""SQLite source: the session (`session`) and the type mapping (`types`).

`rivet_core.source.open_source` is the entry point; nothing is re-exported here.
"""
