"""What an export's prefix keeps, and where its data lives: asked by the finalize facade
after a publish, by `rivet gc`, `rivet validate` and the API — never by importing a runner.

`gc.py` applies retention (rivet_core/manifest/retention.py) under the export's lock;
`dataset_kind.py` says whether a dataset grows run after run or is replaced;
`bucket_layout.py` where a `partition_by` export's buckets live.
"""
