"""Dagster integration for the Rivet core engine: every export in rivet.yaml becomes an asset.

In a `dg` project, declare `rivet_dagster.RivetExportsComponent` in a `defs.yaml`
(`dg scaffold defs rivet_dagster.RivetExportsComponent <folder>`); in any other code
location, merge `build_definitions("rivet.yaml")` with your own definitions. Importing
this package has no side effects. The adapter talks to the engine only through
`rivet_core.api` (docs/architecture.md).
"""

from rivet_core.api import __version__
from rivet_dagster.component import RivetExportsComponent
from rivet_dagster.factory import build_definitions
from rivet_dagster.partitions import export_partitions_def

__all__ = ["RivetExportsComponent", "__version__", "build_definitions", "export_partitions_def"]
