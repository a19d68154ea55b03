"""A cursor, time or chunk column the export's query does not return stops `rivet check` and
`rivet run` before any row is read, naming the field and the closest real column
(rivet_core/config/access_columns.py). On SQLite an unknown double-quoted identifier is a
string literal, so without the check the query itself ran."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rivet_core import api
from rivet_core.config.access_columns import missing_access_column
from tests.helpers import REPO
from tests.helpers import rivet_quick as rivet

DEMO = REPO / "examples" / "demo"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo database, made once (a clean checkout has none beside the demo config)."""
    return api.ensure_demo_database(tmp_path_factory.mktemp("demo_db") / "shop.db")


@pytest.fixture
def demo_copy(tmp_path: Path, demo_db: Path) -> Callable[[str, str], Path]:
    def copy(old: str, new: str) -> Path:
        return _demo_copy(tmp_path, demo_db, old, new)
    return copy


def _demo_copy(tmp_path: Path, demo_db: Path, old: str, new: str) -> Path:
    shutil.copy(DEMO / "rivet.yaml", tmp_path / "rivet.yaml")
    shutil.copy(demo_db, tmp_path / "shop.db")
    config = tmp_path / "rivet.yaml"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new))
    return config


def test_the_message_names_the_field_the_column_and_the_closest_real_one(
        demo_copy: Callable[[str, str], Path]) -> None:
    config = api.load_config(demo_copy("cursor_column: updated_at", "cursor_column: updatedat"))
    export = config.export("orders")
    columns = ["id", "status", "updated_at", "created_at"]
    assert missing_access_column(export, columns) == (
        "cursor_column 'updatedat' is not a column of the export's query (did you mean 'updated_at'?)"
        " — fix exports[].cursor_column; the query returns: id, status, updated_at, created_at")
    assert missing_access_column(export, ["id", "updatedat"]) is None
    full = config.export("customers")
    assert full.mode == "full" and missing_access_column(full, []) is None


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_misspelled_cursor_column_stops_check_and_run_before_reading(
        tmp_path: Path, demo_copy: Callable[[str, str], Path], command: str) -> None:
    config = demo_copy("cursor_column: updated_at", "cursor_column: updatedat")
    result = rivet(command, "-c", str(config), "-e", "orders")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "cursor_column 'updatedat' is not a column of the export's query (did you mean 'updated_at'?)" in out
    assert not list(tmp_path.glob("output/orders/**/*.parquet"))  # nothing was written


def test_a_cursor_column_in_another_case_is_refused_with_the_querys_spelling(
        demo_copy: Callable[[str, str], Path]) -> None:
    """SQLite (and MySQL) accept `UPDATED_AT` in SQL, but the run reads the cursor from each
    batch by the name the query returned: refused up front, not after the whole read."""
    config = demo_copy("cursor_column: updated_at", "cursor_column: UPDATED_AT")
    result = rivet("run", "-c", str(config), "-e", "orders")
    assert result.returncode == 1
    assert "cursor_column 'UPDATED_AT' is not a column of the export's query (did you mean 'updated_at'?)" \
        in result.stdout + result.stderr
