"""The single-query run: one export unit read by one query into staging, then published.

`job.py` holds `ExportRun` — its named phases (extract, gate_schema, publish, fail) are the
life cycle every runner builds on, and `ExportRun.run` the one place `--resume`'s gate runs
(`resume_gate.py`); `lost_cursor.py` settles the cursor's two disagreements with the
destination (a lost state store, a lost destination). The read itself is staging/'s.
"""
