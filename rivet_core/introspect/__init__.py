"""Read a source database's catalog: tables, columns and their Arrow mapping, keys,
indexes, row statistics, cursor candidates and EXPLAIN access paths.

Used by `rivet init` (scaffold a config from a live database), `rivet check` (diagnose an
existing config) and `rivet plan` (a reviewable artifact). Everything goes through the
source session code (`rivet_core.source`), so connection handling, snapshots, credential
redaction and the type mapping are the ones the export itself uses.
"""

from rivet_core.introspect.estimate import estimate_rows, estimate_rows_in

__all__ = ["estimate_rows", "estimate_rows_in"]
