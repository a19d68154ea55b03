"""The chunked run (`mode: chunked`): one export split into windows by the chunk planner
(rivet_core/chunks/), each window read and written on its own, the whole published once.

`run.py` runs every window in one process; `tasks.py` runs them as claimable tasks (any
worker, any host: the Dagster path and `rivet run` alike); `resume.py` decides what a
`--resume` keeps, `withdraw.py` what a failed window takes back, `window_sessions.py` reads
each window on its own snapshot; `reconcile.py` is `rivet reconcile` and `rivet repair`.
"""
