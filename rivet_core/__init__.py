"""Rivet core engine: pure extraction engine, no Dagster imports (DESIGN.md §2)."""
