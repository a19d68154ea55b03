"""The ordered writers (docs/adr/0001-write-ordering-facades.md): one module per write group.

Only these modules write the file log, the cursor, the progression, the metrics, the
manifest and a run's drift verdict (tests/pipeline/test_facade_only_writers.py), and only
they import the state writers and `rivet_core.manifest.artifacts` (`.importlinter`).
"""
