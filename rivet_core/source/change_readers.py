"""The change reader of a source engine (rivet_core/source/changes.py), chosen by engine.

The CDC run (rivet_core/pipeline/cdc/run.py) asks for a reader without knowing the engines;
which reader serves which engine, and the engine-specific options each takes, are a source
concern, so the choice lives here with the readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rivet_core.errors import ConfigError

if TYPE_CHECKING:
    from rivet_core.source.changes import ChangeReader


@dataclass(frozen=True)
class ChangeReaderRequest:
    """What a run gives any reader; each engine takes the fields it has a use for
    (`slot`/`publication`/`has_history`: PostgreSQL; `server_id`/`tuning`: MySQL/MariaDB)."""

    url: str
    export_name: str
    tables: tuple[str, ...]
    slot: str
    publication: str
    server_id: int
    has_history: bool
    tuning: Any


def open_change_reader(engine: str, request: ChangeReaderRequest) -> ChangeReader:
    """The reader of `engine`'s change log for `request`; a ConfigError for an engine without one."""
    if engine == "postgres":
        from rivet_core.source.postgres.changes import PgChangeOptions, PgChangeReader

        return PgChangeReader(PgChangeOptions(url=request.url, export_name=request.export_name,
                                              slot=request.slot, publication=request.publication,
                                              tables=request.tables, has_history=request.has_history))
    if engine == "mysql":
        from rivet_core.source.mysql.changes import MySQLChangeReader

        return MySQLChangeReader(request.url, list(request.tables), server_id=request.server_id,
                                 export_name=request.export_name, tuning=request.tuning)
    raise ConfigError(f"export '{request.export_name}': mode: cdc on a {engine} source has no change "
                      "reader in this build — PostgreSQL and MySQL/MariaDB are supported")
