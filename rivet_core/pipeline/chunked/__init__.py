"""The chunked run (`mode: chunked`): one export split into windows by the chunk planner
(rivet_core/chunks/), each window read and written on its own, the whole published once.

`run.py` runs every window in one process (`ChunkedRun`); `tasks.py` runs them as steps an
orchestrator drives — the planning call, a window batch, the finalize — each one class below
`ChunkedRun`, holding what they share as services: `planning.py` (the windows and their
schema, what each window holds at the source) and `checkpoint.py` (the export's chunk runs in
the state store). `resume.py` decides what a `--resume` keeps, `withdraw.py` what a failed
gate takes back; `reconcile.py` is `rivet reconcile` and `rivet repair`.
"""
