"""`mode: cdc`: one bounded drain of a change log, published with the batch trail.

A run (run.py `CdcStream`) opens the engine's `ChangeReader` (rivet_core/source/changes.py),
takes `initial: snapshot` first when asked (snapshot.py), drains the window into staged parts
per captured table (stage.py: a part is cut only at a transaction's end), publishes each
table through the same facades as a batch export (parts → manifest `mode: cdc` →
`_SUCCESS` → the position as the export's cursor), and only then confirms the reader, so
the server may forget what was published (docs/adr/0001-write-ordering-facades.md).

Exactly once across published runs: the next run resumes after the last *published*
position — the state store's cursor, else the destination manifest's `cursor_high`
(positions.py) — never from the server's marker alone, and drops what it already
published (a run killed between `_SUCCESS` and the confirm re-reads it from the slot).
"""

from rivet_core.pipeline.cdc.run import run_cdc

__all__ = ["run_cdc"]
