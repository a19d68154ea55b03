"""Shared base of the state-store mixins: the database and a UTC clock."""

from __future__ import annotations

from datetime import UTC, datetime

from rivet_core.state.database import StateDatabase


def utc_now_text() -> str:
    """RFC3339 UTC timestamp text, the storage format of every state timestamp."""
    return datetime.now(UTC).isoformat()


class StoreBase:
    database: StateDatabase
