"""Dagster adapter tests. Shared pieces live in modules the tests import explicitly:
support.py (PostgreSQL `orders`, destination oracle, in-process fixtures) and e2e_demo.py
(throwaway demo copies for the CLI and UI tests). This file only silences Dagster's own
Beta/Preview/Supersession notices and internal deprecations for the tests here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dagster.support import DAGSTER_NOISE

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            for spec in DAGSTER_NOISE:
                item.add_marker(pytest.mark.filterwarnings(spec))
