"""Who started a run from outside the CLI: an orchestrator's name and its own run id.

An integration package that schedules exports passes `orchestrator_run_id` (its id for the
run) and `orchestrator` (its display name, e.g. the scheduler's product name) so the
manifest, the run report, the state store's rows and a lock refusal can point at the
orchestrator's run without the core knowing which orchestrator it is.

Before these neutral names the one integration's run id went by a keyword named after it,
`<name>_run_id=`. `accepts_legacy_run_id` keeps that spelling working on the public
functions with a DeprecationWarning, and derives the orchestrator's name from it; the
manifest reader and the state store migration (state/migrations.py v5) read the old
`<name>_run_id` keys and columns the same way.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

#: The neutral keyword, manifest key and state store column.
RUN_ID_KEY = "orchestrator_run_id"
_LEGACY = re.compile(r"^([a-z][a-z0-9]*)_run_id$")
#: `<name>_run_id` names that are not an orchestrator's legacy run id.
_NOT_LEGACY = frozenset({RUN_ID_KEY, "rivet_run_id", "reconcile_run_id", "last_committed_run_id",
                         "last_verified_run_id"})

F = TypeVar("F", bound=Callable[..., Any])


def legacy_run_id_name(key: str) -> str | None:
    """The orchestrator named by a legacy `<name>_run_id` key, or None for any other key."""
    match = _LEGACY.match(key)
    if match is None or key in _NOT_LEGACY:
        return None
    return match.group(1)


def legacy_run_id_key(orchestrator: str | None) -> str | None:
    """The `<name>_run_id` key the manifest and the run report wrote before the neutral
    names, for `orchestrator` (`Scheduler` → `scheduler_run_id`); None when there is no
    orchestrator or its name cannot make such a key. Written beside `orchestrator_run_id`
    for one release (docs/manifest.md) so readers of the JSON files that look for the old
    key keep working while they move to the neutral one."""
    if not orchestrator:
        return None
    key = f"{orchestrator.lower()}_run_id"
    return key if legacy_run_id_name(key) is not None else None


def with_legacy_run_id(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` (a JSON object about to be written) plus, when it names an orchestrator and
    its run id, the old `<name>_run_id` key with the same id — for one release, so readers of
    our JSON files and `--json` outputs that look for the old key keep working while they
    move to `orchestrator_run_id` (docs/manifest.md "Deprecated keys")."""
    legacy = legacy_run_id_key(fields.get("orchestrator"))
    if legacy is None or not fields.get(RUN_ID_KEY) or legacy in fields:
        return fields
    return {**fields, legacy: fields[RUN_ID_KEY]}


def display_name(name: str) -> str:
    """How a legacy key's orchestrator name is shown: `scheduler` → `Scheduler`."""
    return name[:1].upper() + name[1:]


def legacy_run_id(data: Mapping[str, Any]) -> tuple[str | None, Any]:
    """(orchestrator display name, value) of the one legacy `<name>_run_id` key in `data`."""
    for key, value in data.items():
        name = legacy_run_id_name(key)
        if name is not None:
            return display_name(name), value
    return None, None


def accepts_legacy_run_id(func: F) -> F:
    """Let `func(…, <name>_run_id=x)` mean `func(…, orchestrator_run_id=x, orchestrator=Name)`,
    with a DeprecationWarning. `func` must take `orchestrator_run_id`; `orchestrator` is set
    only when `func` takes it. Any other unknown keyword is still a TypeError."""
    takes_name = "orchestrator" in inspect.signature(func).parameters

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        legacy = [k for k in kwargs if legacy_run_id_name(k) is not None]
        if legacy:
            if len(legacy) > 1 or kwargs.get(RUN_ID_KEY) is not None:
                raise TypeError(f"{func.__qualname__}() got two run ids ({', '.join([*legacy, RUN_ID_KEY])}) "
                                f"— pass only {RUN_ID_KEY}=")
            key = legacy[0]
            name = display_name(legacy_run_id_name(key) or key)
            warnings.warn(f"{func.__qualname__}(): `{key}=` is deprecated — pass {RUN_ID_KEY}= "
                          + (f"and orchestrator={name!r} " if takes_name else "") + "instead",
                          DeprecationWarning, stacklevel=2)
            kwargs[RUN_ID_KEY] = kwargs.pop(key)
            if takes_name and kwargs.get("orchestrator") is None:
                kwargs["orchestrator"] = name
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def legacy_run_id_attribute(obj: Any, name: str) -> Any:
    """A `__getattr__` body: `obj.<name>_run_id`, the attribute's spelling before
    `orchestrator_run_id`, reads `obj.orchestrator_run_id` with a DeprecationWarning; any other
    missing attribute is an AttributeError as usual."""
    if legacy_run_id_name(name) is None:
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    warnings.warn(f"{type(obj).__name__}.{name} is deprecated — read {RUN_ID_KEY} (and orchestrator)",
                  DeprecationWarning, stacklevel=3)
    return obj.orchestrator_run_id


__all__ = ["RUN_ID_KEY", "accepts_legacy_run_id", "display_name", "legacy_run_id", "legacy_run_id_attribute",
           "legacy_run_id_key", "legacy_run_id_name", "with_legacy_run_id"]
