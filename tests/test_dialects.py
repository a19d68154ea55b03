"""The engine dialects (rivet_core/source/dialect.py) and the one catalog module
(rivet_core/catalog/) that the chunk planner, the estimator, `rivet init` and `rivet check`
share (issue 18 item 2).

1. No engine-name branch outside `rivet_core/source/`: an AST scan of every module fails on
   a comparison with "postgres"/"mysql"/"sqlite" (`session.engine == "mysql"`,
   `source.type in ("postgres", …)`). The configuration (`rivet_core/config/`) is exempt:
   there the names are the values it validates.
2. The catalog answers the same on PostgreSQL and MariaDB for the same table — columns,
   NOT NULL, primary key, single-column unique keys, statistics — and every session carries
   its engine's dialect.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rivet_core.catalog import list_indexes, list_tables, row_estimate, table_exists, table_info
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.source import open_source
from rivet_core.source.dialect import dialect_of
from tests.helpers import db_exec

ROOT = Path(__file__).resolve().parents[1]
ENGINES = {"postgres", "mysql", "sqlite"}
EXEMPT = ("rivet_core/source/", "rivet_core/config/")
TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)


def _names_an_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in ENGINES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_an_engine(e) for e in node.elts)
    return False


def engine_branches(source: str, filename: str) -> list[str]:
    """`file:line` of every comparison against an engine name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare) and any(
                _names_an_engine(part) for part in (node.left, *node.comparators)):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_no_engine_branch_outside_the_source_package() -> None:
    found = []
    for path in sorted((ROOT / "rivet_core").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(EXEMPT):
            found += engine_branches(path.read_text(encoding="utf-8"), rel)
    assert found == [], ("engine-name branches outside rivet_core/source/ — ask the session's "
                         f"dialect instead (session.dialect / dialect_of): {found}")


@pytest.mark.parametrize("line", [
    'if session.engine == "postgres": pass',
    'x = "CHAR" if session.engine != "mysql" else "TEXT"',
    'if source.type in ("sqlite", "duckdb"): pass',
])
def test_the_scan_sees_a_planted_branch(line: str) -> None:
    assert engine_branches(line, "planted.py") == ["planted.py:1"]


def test_the_scan_leaves_engine_names_as_data_alone() -> None:
    assert engine_branches('ENGINES = {"postgres": 1}\nlog("mysql down")\nf(engine="sqlite")', "x.py") == []


def test_dialect_of_names_every_engine_and_refuses_others() -> None:
    for engine in ENGINES:
        assert dialect_of(engine).name == engine
    with pytest.raises(Exception, match="unknown source engine 'oracle'"):
        dialect_of("oracle")


DDL = ("CREATE TABLE cat_t (id INTEGER NOT NULL PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, "
       "note VARCHAR(20), pair_a INTEGER, pair_b INTEGER, UNIQUE (pair_a, pair_b))")


@pytest.fixture(params=[pytest.param("pg", marks=pytest.mark.postgres),
                        pytest.param("mysql", marks=pytest.mark.mysql)])
def url(request: pytest.FixtureRequest) -> str:
    url = request.getfixturevalue("pg_url" if request.param == "pg" else "mysql_url")
    rows = ", ".join(f"({i}, 'c{i}', NULL, {i}, {i})" for i in range(1, 201))
    stats = "ANALYZE cat_t" if request.param == "pg" else "ANALYZE TABLE cat_t"
    db_exec(url, DDL, f"INSERT INTO cat_t VALUES {rows}", stats)
    return url


def test_the_catalog_answers_the_same_on_every_server(url: str) -> None:
    with open_source(url, TUNING) as session:
        assert session.dialect is dialect_of(session.engine)
        info = table_info(session, (None, "cat_t"))
        assert info.columns == ["id", "code", "note", "pair_a", "pair_b"]
        assert info.not_null == {"id", "code"}
        assert info.primary_key == ("id",)
        assert info.unique == ["id", "code"]  # the two-column key is not a keyset key
        # ANALYZE makes the statistic exact for a 200-row table on both servers.
        assert info.row_estimate == 200
        assert info.avg_row_bytes is not None and info.avg_row_bytes > 0
        assert row_estimate(session, None, "cat_t") == 200
        assert table_exists(session, None, "cat_t") and not table_exists(session, None, "cat_nope")
        assert "cat_t" in list_tables(session, None)
        indexes = {ix.columns: ix.unique for ix in list_indexes(session, None, "cat_t")}
        assert indexes[("id",)] and indexes[("code",)] and indexes[("pair_a", "pair_b")]
        missing = table_info(session, (None, "cat_nope"))
        assert (missing.columns, missing.row_estimate) == ([], None)


def test_the_sqlite_catalog_reads_pragmas_and_has_no_statistics_before_analyze(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "cat.db"
    with sqlite3.connect(path) as conn:
        conn.execute(DDL)
        conn.executemany("INSERT INTO cat_t VALUES (?, ?, NULL, ?, ?)", [(i, f"c{i}", i, i) for i in range(1, 51)])
    with open_source(f"sqlite:///{path}", TUNING) as session:
        info = table_info(session, (None, "cat_t"))
        assert (info.primary_key, info.unique, info.not_null) == (("id",), ["id", "code"], {"id", "code"})
        assert (info.row_estimate, row_estimate(session, None, "cat_t")) == (None, None)
    with sqlite3.connect(path) as conn:
        conn.execute("ANALYZE")
    with open_source(f"sqlite:///{path}", TUNING) as session:
        # sqlite_stat1 holds a table-level row only for a table without indexes: still None here.
        assert row_estimate(session, None, "cat_t") is None
