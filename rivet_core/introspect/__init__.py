"""Read a source database's catalog: tables, columns and their Arrow mapping, keys,
indexes, row statistics, cursor candidates and EXPLAIN access paths.

Used by `rivet init` (scaffold a config from a live database), `rivet check` (diagnose an
existing config) and `rivet plan` (a reviewable artifact). Everything goes through the
source session code (`rivet_core.source`), so connection handling, snapshots, credential
redaction and the type mapping are the ones the export itself uses.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rivet_core.introspect.estimate import estimate_rows, estimate_rows_in

__all__ = ["estimate_rows", "estimate_rows_in"]


def __getattr__(name: str) -> Any:
    # Lazy (PEP 562): importing a light submodule (`rivet init`'s SMALL_TABLE_ROWS, loaded with
    # the CLI) must not pull in estimate → config models → pydantic/pyarrow and the sources.
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("rivet_core.introspect.estimate"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
