"""The `partition_by` run: one sub-export per date bucket that holds rows, under one root prefix.

`run.py` plans the buckets and runs each as a unit of its own, then checks the bucket set;
`ranges.py` is the pure bucket arithmetic (day, month, year; property-tested). Where the
buckets live is pipeline/retention/bucket_layout.py's, apart from the run so retention can
find them without importing the runner.
"""
