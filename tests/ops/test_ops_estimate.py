"""`estimate_rows` (imported by the progress reporter): cheap, honest row estimates."""

from __future__ import annotations

from pathlib import Path

from rivet_core.config.models import SourceConfig
from rivet_core.config.tuning import resolve_tuning
from rivet_core.introspect import estimate_rows, estimate_rows_in
from rivet_core.source import open_source
from tests.helpers import db_exec


def test_postgres_table_and_query_estimates(pg_url: str, monkeypatch) -> None:  # noqa: ANN001
    db_exec(pg_url, "CREATE TABLE t (id int PRIMARY KEY, v text)",
            "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 1234) g")
    monkeypatch.setenv("OPS_EST_URL", pg_url)
    source = SourceConfig(type="postgres", url_env="OPS_EST_URL")
    assert estimate_rows(source, table="t") == 1234  # never analyzed: exact bounded count
    assert estimate_rows(source, table="public.t") == 1234
    db_exec(pg_url, "DELETE FROM t WHERE id > 1000", "ANALYZE t")
    assert estimate_rows(source, table="t") == 1000  # pg_class.reltuples after ANALYZE
    planned = estimate_rows(source, query="SELECT * FROM t WHERE id <= 100")
    assert planned is not None and 50 <= planned <= 200  # the planner's estimate, not a count
    assert estimate_rows(source, table="no_such_table") is None


def test_mysql_table_estimate(mysql_url: str, monkeypatch) -> None:  # noqa: ANN001
    db_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t SELECT seq FROM seq_1_to_777")
    monkeypatch.setenv("OPS_EST_URL", mysql_url)
    estimate = estimate_rows(SourceConfig(type="mysql", url_env="OPS_EST_URL"), table="t")
    assert estimate is not None and 500 <= estimate <= 1000  # InnoDB statistics are approximate


def test_bounded_count_never_reads_past_the_cap(tmp_path: Path, sqlite_mix: str) -> None:
    source = SourceConfig(type="sqlite", url=sqlite_mix)
    assert estimate_rows(source, table="big_int") == 2_500
    with open_source(sqlite_mix, resolve_tuning(None, None)) as session:
        # 2,500 rows, cap 100: the count stops at 100, reported as a lower bound.
        assert estimate_rows_in(session, table="big_int", cap=100) == 100
