"""Quarantine moves (docs/invariants.md M9; docs/rivet-compat.md "Resume decisions and rehydration" — only the move part).

Objects that a resume or a re-run of a window finds divergent or untracked are
moved to `_quarantine/<run token>/<original key>` so nothing is ever deleted. A move is
best-effort: a failure is logged as a WARNING and reported as False, never raised and
never "fixed" by deleting. The caller counts failures (quarantine_move_failures).
"""

from __future__ import annotations

import logging

from rivet_core.destination.base import Destination
from rivet_core.errors import DestinationError
from rivet_core.manifest.layout import QUARANTINE_PREFIX, run_token

log = logging.getLogger(__name__)


def quarantine_key(run_id: str, key: str) -> str:
    """`_quarantine/<run token>/<key>` (the run id sanitized like the per-run manifest)."""
    return f"{QUARANTINE_PREFIX}{run_token(run_id)}/{key}"


def quarantine_object(dest: Destination, run_id: str, key: str) -> bool:
    """Move `key` aside for `run_id`; True if moved, False (WARN logged) if it could not be."""
    target = quarantine_key(run_id, key)
    try:
        dest.move(key, target)
    except DestinationError as exc:
        log.warning("could not quarantine '%s' to '%s' at %s: %s (left in place)", key, target, dest.uri, exc)
        return False
    log.info("quarantined '%s' → '%s' at %s", key, target, dest.uri)
    return True
