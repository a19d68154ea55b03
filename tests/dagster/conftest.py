"""Fixtures for the Dagster adapter tests: a throwaway instance, a PostgreSQL `orders`
table, and a destination target (local disk or the real S3 server)."""

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
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def orders_pg(pg_url: str) -> str:
    """A fresh PostgreSQL database holding the `orders` table described in support.py."""
    create_orders(pg_url)
    return pg_url


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """Each test using it runs once to local disk and once to the real S3 server."""
    if request.param == "s3":
        return Target("s3", tmp_path, request.getfixturevalue("s3"))
    return Target("local", tmp_path)


@pytest.fixture
def local(tmp_path: Path) -> Target:
    return Target("local", tmp_path)
