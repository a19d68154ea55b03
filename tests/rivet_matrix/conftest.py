"""Fixtures shared by the Rivet matrix tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.rivet_matrix.cli_matrix import fixture_databases


@pytest.fixture(scope="module")
def matrix_databases() -> Iterator[tuple[str, str]]:
    """Rivet's matrix fixture databases on the suite's PostgreSQL and MariaDB (cli_matrix.py
    `fixture_databases`), for one test module; a server the suite did not start fails the
    module naming the variable."""
    def admin(name: str) -> str:
        value = os.environ.get(name)
        if not value:
            pytest.fail(f"{name} is not set — run the suite with `make test` (it starts the servers)", pytrace=False)
        return value

    with fixture_databases(admin("TEST_PG_DSN"), admin("TEST_MYSQL_DSN")) as databases:
        yield databases
