"""Dagster adapter for the Rivet core engine (see issue: Dagster layer)."""
