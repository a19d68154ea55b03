"""The single-query run: one export unit read by one query into staging, then published.

`job.py` holds `ExportRun` — its named phases (extract, gate_schema, publish, fail) are the
life cycle every runner builds on; `extract.py` streams the query into staged parts, and the
rest are the steps it asks on the way (staging directories, the cursor's disagreements with
the destination, `--resume`'s gate, part names, the progress estimate, `--reconcile`).
"""
