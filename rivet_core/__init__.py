"""Rivet core engine: the pure extraction engine (it never imports or names an orchestrator; docs/architecture.md).

Use it through `rivet_core.api` (the public surface an orchestrator adapter and scripts use)
or the `rivet` command line (`rivet_core.cli`).
"""

__version__ = "0.1.0"
