"""Fixtures for the Dagster CLI tests: a temp copy of the demo with a small SQLite database.

`demo` copies examples/demo/rivet.yaml into a temp directory, builds the demo database
next to it with 500 orders (RIVET_DEMO_ORDERS), and gives a throwaway DAGSTER_HOME, so
`rivet_dagster.definitions` loaded with `demo.env()` never touches the repository's demo
output or the developer's instance.

(The in-process adapter tests keep their fixtures in support.py.)
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO / "examples" / "demo" / "rivet.yaml"
DEMO_ORDERS = 500


@dataclass(frozen=True)
class Demo:
    dir: Path
    dagster_home: Path

    @property
    def config(self) -> Path:
        return self.dir / "rivet.yaml"

    @property
    def database(self) -> Path:
        return self.dir / "shop.db"

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that loads `rivet_dagster.definitions` on this demo."""
        return {**os.environ, "RIVET_CONFIG": str(self.config), "DAGSTER_HOME": str(self.dagster_home),
                "RIVET_DEMO_ORDERS": str(DEMO_ORDERS), "PYTHONPATH": str(REPO)}

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple]:
        """Rows straight from the demo's SQLite database."""
        with sqlite3.connect(self.database) as conn:
            return conn.execute(sql, params).fetchall()


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Demo:
    from rivet_core.demo import ensure_demo_database

    root = tmp_path / "demo"
    root.mkdir()
    shutil.copy(DEMO_CONFIG, root / "rivet.yaml")
    monkeypatch.setenv("RIVET_DEMO_ORDERS", str(DEMO_ORDERS))
    ensure_demo_database(root / "shop.db")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return Demo(dir=root, dagster_home=home)
