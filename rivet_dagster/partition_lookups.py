"""Dynamic-partition lookups answered once per loop while a chunk step attaches metadata to
each of its windows.

A ranged chunk step scopes metadata to each window's partition (`add_asset_metadata(…,
partition_key=…)`: the window's source fingerprint in the asset body, its rows, bytes and
parts in the IO manager). Dagster checks every such call against the step's partition range
by asking the instance again — `has_dynamic_partition` for the range's first and last key and
`get_dynamic_partitions` for all keys: three queries per call. On dagster-postgres each
query opens a new connection (its storage pools none) and checks for its table first, so a
32-window step spent 4.6 s of its 14.7 s in those lookups, against 0.9 s on a SQLite instance
(docs/benchmarks.md, "The Dagster path on dagster-postgres"; sampled stacks of the run worker).

Within one loop the answers cannot change in a way that matters: the step's own range was
registered before the run was requested, and the planner only ever adds partitions. So
`cached_partition_lookups` memoizes those two instance methods on the instance object for the
duration of a `with` block in the step's own thread, and restores them after; Dagster still
makes its check, against answers taken at the start of the block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: The DynamicPartitionsStore methods Dagster's range check calls (partitions_definition.py).
CACHED_METHODS = ("has_dynamic_partition", "get_dynamic_partitions")


def _memoized(method: Callable[..., Any]) -> Callable[..., Any]:
    answers: dict[Any, Any] = {}

    def lookup(*args: Any, **kwargs: Any) -> Any:
        key = (args, tuple(sorted(kwargs.items())))
        if key not in answers:
            answers[key] = method(*args, **kwargs)
        return answers[key]

    return lookup


@contextmanager
def cached_partition_lookups(instance: Any) -> Iterator[None]:
    """Within the block, each distinct dynamic-partition lookup on `instance` runs once."""
    shadowed = [name for name in CACHED_METHODS if name not in vars(instance)]
    for name in shadowed:
        setattr(instance, name, _memoized(getattr(instance, name)))
    try:
        yield
    finally:
        for name in shadowed:
            delattr(instance, name)
