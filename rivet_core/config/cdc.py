"""`mode: cdc` configuration: the `cdc:` block (its rules: cdc_rules.py).

A CDC export reads a table's change log instead of the table (rivet_core/source/changes.py,
rivet_core/pipeline/cdc/). The block carries Rivet's field names and defaults (Rivet's CDC
reference, docs/config-reference.md `exports[].cdc`). It is apart from models.py, which
imports it, so the rules (which need the export model) do not make a circle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rivet_core.config.blocks import BlockModel

#: Rivet's defaults (its CDC reference: `--slot`, `--server-id`, `--rollover`).
DEFAULT_SLOT = "rivet_slot"
DEFAULT_SERVER_ID = 4271
DEFAULT_ROLLOVER = 100_000


class CdcConfig(BlockModel):
    """`exports[].cdc`: the CDC-specific knobs; the export's `table`/`tables`, `format` and
    `destination` say what is captured and where it goes."""

    #: `snapshot`: the first run anchors the log position, then writes every row of each
    #: table under `<prefix>/snapshot/` (its own manifest and `_SUCCESS`), then drains.
    initial: Literal["snapshot", "none"] = "none"
    #: A file the run writes the last published position to after each publish (Rivet's
    #: checkpoint, `{"lsn": "X/Y"}` or `{"file": …, "pos": …}`); the state store and the
    #: destination's manifest remain what the next run resumes from.
    checkpoint: str | None = None
    #: Drain to the log's end as of the run's start, then stop (the only model here).
    until_current: bool = True
    #: MySQL/MariaDB replica id for the binlog connection; unique per server.
    server_id: int | None = Field(default=None, ge=1, le=4294967295)
    #: PostgreSQL logical replication slot (created on the first run if absent).
    slot: str | None = None
    #: PostgreSQL publication the slot decodes through (created for the export's tables if
    #: absent); default `<slot>_pub`.
    publication: str | None = None
    #: Changes per part; a part is cut only at a transaction's end, never inside one.
    rollover: int = Field(default=DEFAULT_ROLLOVER, ge=1)

    @property
    def resolved_slot(self) -> str:
        return self.slot or DEFAULT_SLOT

    @property
    def resolved_publication(self) -> str:
        return self.publication or f"{self.resolved_slot}_pub"

    @property
    def resolved_server_id(self) -> int:
        return self.server_id or DEFAULT_SERVER_ID
