"""The table-format error, in a module of its own: the committer (commit.py) and the schema
evolution it calls (delta_schema.py) both raise it, and neither imports the other for it."""

from __future__ import annotations

from rivet_core.errors import DataIntegrityError


class TableCommitError(DataIntegrityError):
    """The table cannot take this run's parts (a type change, a refused type). Exit 3."""
