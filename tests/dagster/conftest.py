"""Fixtures for the in-process Dagster adapter tests, and Dagster's noise filtered out.

Helpers live in support.py (PostgreSQL `orders`, the destination oracle); the CLI and UI
tests bring their own demo copies from e2e_demo.py. Dagster's own Beta/Preview/
Supersession notices and internal deprecations are silenced for every test here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from tests.dagster.support import DAGSTER_NOISE, Target, create_orders

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            for spec in DAGSTER_NOISE:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An in-memory Dagster instance, cleaned up after the test."""
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def orders_pg(pg_url: str) -> str:
    """A fresh PostgreSQL database holding the `orders` table described in support.py."""
    create_orders(pg_url)
    return pg_url


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A test using it runs once to local disk and once to the real S3 server."""
    if request.param == "s3":
        return Target("s3", tmp_path, request.getfixturevalue("s3"))
    return Target("local", tmp_path)


@pytest.fixture
def local(tmp_path: Path) -> Target:
    """Exports to local disk under the test's tmp_path."""
    return Target("local", tmp_path)
