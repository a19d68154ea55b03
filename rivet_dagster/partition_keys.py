"""Chunk partition keys: the readable spelling of a chunk window's key, and back.

The codec of rivet_dagster/partitions.py's chunk partitions (its module docstring says what
the keys look like and why both forms are read; ADR-0005 "Partition keys"). Kept apart from
partitions.py, which builds Dagster objects, so that the planner's pure part
(rivet_dagster/planner.py) imports no Dagster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from rivet_core import api

#: A range window's key in either form: the core's padded bounds (15 digits, `x` + 20 digits
#: above 10^15, `.` + 20 digits below 0) or the readable ones (an optional `-`, then digits).
#: The column holds no `-` (`safe_column`), so the last `_` before the bounds splits it off.
_RANGE_KEY = re.compile(r"^(?P<column>[A-Za-z0-9_]+)_(?P<lo>-?[0-9]+|[x.][0-9]{20})-(?P<hi>-?[0-9]+|[x.][0-9]{20})$")
_KEYSET_KEY = re.compile(r"^p(?P<index>[0-9]{1,9})$")


def _bound(text: str) -> int:
    """A bound of either form: a padded one decodes as the core encoded it; a readable one is
    the plain integer (for 0..10^15 − 1 both read the same digits)."""
    return api.window_keys.decode_int(text) if text[:1] in ("x", ".") else int(text)


def chunk_window_key(partition_key: str) -> str:
    """The core window key (`chunk_task.window_key`) a chunk partition key names — a readable
    key or a padded one registered before the readable form (module docstring); a day window's
    key, the same in both, is returned as it is."""
    found = _RANGE_KEY.match(partition_key)
    if found is not None:
        return api.window_keys.range_key(found["column"], _bound(found["lo"]), _bound(found["hi"]))
    found = _KEYSET_KEY.match(partition_key)
    if found is not None:
        return api.window_keys.keyset_key(int(found["index"]))
    return partition_key


def chunk_partition_key(window_key: str) -> str:
    """The readable partition key of a core window key (`id_000000000000000-000000000249999` →
    `id_0-249999`, `p000000042` → `p42`); a key of another shape is returned as it is."""
    found = _RANGE_KEY.match(window_key)
    if found is not None:
        return f"{found['column']}_{_bound(found['lo'])}-{_bound(found['hi'])}"
    found = _KEYSET_KEY.match(window_key)
    if found is not None:
        return f"p{int(found['index'])}"
    return window_key


#: A core window key inside a text (a refusal of the core names windows by their padded keys).
_PADDED_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_.])(?:[A-Za-z0-9_]+_(?:[0-9]{15}|[x.][0-9]{20})-(?:[0-9]{15}|[x.][0-9]{20})"
                             r"|p[0-9]{9})(?![A-Za-z0-9_])")


def readable_window_keys(text: str) -> str:
    """`text` with every padded window key in it spelled as its readable partition key: the
    core's refusals name windows by their `chunk_task` keys, a Dagster user by partition."""
    return _PADDED_IN_TEXT.sub(lambda found: chunk_partition_key(found[0]), text)


def partition_keys_by_window(registered: Iterable[str]) -> dict[str, str]:
    """Window key → the partition key that names it among `registered` (either form)."""
    return {chunk_window_key(key): key for key in registered}


def partition_key_for(window_key: str, registered: Mapping[str, str]) -> str:
    """The partition key of a window: the one registered for it (`partition_keys_by_window`),
    else its readable key — so a window registered in the padded form keeps its history."""
    return registered.get(window_key) or chunk_partition_key(window_key)
