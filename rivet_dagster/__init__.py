"""Dagster adapter for the Rivet core engine: every export in rivet.yaml becomes an asset.

Use `build_definitions(config_path)` in your own code location, or point `RIVET_CONFIG`
at a config and load `rivet_dagster.definitions`. The adapter talks to the engine only
through `rivet_core.api` (DESIGN.md §2).
"""

from rivet_dagster.factory import build_definitions

__all__ = ["build_definitions"]
