"""A unit's rows read into staged part files, before anything is published (I1).

`extract.py` streams one query into staged parts (`extract_to_staging`), with the per-batch
checks on the way; `directories.py` owns the staging directories and their cleanup;
`part_names.py` the names a part gets; `row_estimate.py` the progress estimate asked on the
read's own session; `run_reconcile.py` `--reconcile`'s count in the same snapshot. The
runners (single/, chunked/, time_range.py) and the facades that publish staged parts
(facade/publish.py, facade/chunk_commit.py) build on it; it builds on no runner.
"""
