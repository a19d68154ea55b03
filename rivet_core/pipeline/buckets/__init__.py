"""The `partition_by` run: one sub-export per date bucket that holds rows, under one root prefix.

`run.py` plans the buckets and runs each as a unit of its own, then checks the bucket set;
`ranges.py` is the pure bucket arithmetic (day, month, year; property-tested); `layout.py`
says where the buckets live, apart from the run so retention (pipeline/gc.py) can find them
without importing the runner.
"""
