"""Dagster integration for the Rivet core engine: every export in rivet.yaml becomes an asset.

In a `dg` project, declare `rivet_dagster.RivetExportsComponent` in a `defs.yaml`
(`dg scaffold defs rivet_dagster.RivetExportsComponent <folder>`); in any other code
location, merge `build_definitions("rivet.yaml")` with your own definitions. Importing
this package has no side effects. The adapter talks to the engine only through
`rivet_core.api` (docs/architecture.md).

The public names load on first use (PEP 562): the core's config loader imports
`rivet_dagster.config_block` (the `dagster:` block, registered under the
`rivet.config_blocks` entry point) to validate a config, and that must not import Dagster.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "RivetExportsComponent": "rivet_dagster.component",
    "build_definitions": "rivet_dagster.factory",
    "enable_event_batching": "rivet_dagster.event_batching",
    "export_partitions_def": "rivet_dagster.partitions",
    "__version__": "rivet_core.api",
}

__all__ = ["RivetExportsComponent", "__version__", "build_definitions", "enable_event_batching",
           "export_partitions_def"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
