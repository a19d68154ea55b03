"""A MySQL zero date ('0000-00-00') has no date value: it is exported as NULL, as Rivet does —
and the run says so (issue 33: "MySQL '0000-00-00' silently becomes NULL"), one warning per
column with the count, for a single-unit run and per window for a chunked run
(docs/rivet-compat.md "Type mapping")."""

from __future__ import annotations

import json

import pyarrow.dataset as ds
import pytest

from tests.helpers import mysql_connect, rivet, source_block, write_config


@pytest.fixture
def zero_dates(mysql_url: str) -> str:
    conn = mysql_connect(mysql_url)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # lets the table hold zero dates
        cur.execute("CREATE TABLE z (id INT PRIMARY KEY, d DATE, t DATETIME, ok DATE)")
        cur.execute("INSERT INTO z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '2024-01-01'),"
                    " (2, '2021-02-03', '0000-00-00 00:00:00', '2024-01-02'), (3, NULL, NULL, '2024-01-03'),"
                    " (4, '0000-00-00', '2021-02-03 04:05:06', '2024-01-04')")
    conn.close()
    return mysql_url


def _run(tmp_path, url: str, **mode: object) -> dict:  # noqa: ANN001
    config = write_config(tmp_path, source_block(url), [{
        "name": "z", "table": "z", "format": "parquet", "destination": {"type": "local", "path": "out"},
        **mode}])
    result = rivet("run", "-c", str(config), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)["runs"][0]


def _published(tmp_path) -> dict[int, tuple]:  # noqa: ANN001
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    table = ds.dataset([str(tmp_path / "out" / p["path"]) for p in manifest["parts"]]).to_table()
    return {r["id"]: (r["d"], r["t"]) for r in table.to_pylist()}


def test_zero_dates_are_exported_as_null_and_the_run_warns_with_the_count_per_column(tmp_path, zero_dates):
    run = _run(tmp_path, zero_dates, mode="full")
    warnings = [w for w in run["warnings"] if "written as NULL" in w]
    assert len(warnings) == 2, run["warnings"]
    assert warnings[0].startswith("column 'd': 2 value(s)") and "'0000-00-00'" in warnings[0]
    assert warnings[1].startswith("column 't': 2 value(s)") and "cast the column to text" in warnings[1]
    rows = _published(tmp_path)  # the oracle: the parts re-read with pyarrow
    assert rows[1] == (None, None) and rows[3] == (None, None) and rows[4][0] is None
    assert str(rows[2][0]) == "2021-02-03" and str(rows[4][1]) == "2021-02-03 04:05:06"


def test_a_chunked_run_warns_for_the_window_that_held_zero_dates(tmp_path, zero_dates):
    run = _run(tmp_path, zero_dates, mode="chunked", chunk_column="id", chunk_size=2)
    warnings = sorted(w for w in run["warnings"] if "written as NULL" in w)
    assert warnings and all("(window " in w for w in warnings), run["warnings"]
    counted = {}
    for w in warnings:
        column = w.split("'")[1]
        counted[column] = counted.get(column, 0) + int(w.split(": ", 1)[1].split(" ")[0])
    assert counted == {"d": 2, "t": 2}
    assert sorted(_published(tmp_path)) == [1, 2, 3, 4]


def test_a_table_without_zero_dates_gives_no_such_warning(tmp_path, mysql_url):
    conn = mysql_connect(mysql_url)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE z (id INT PRIMARY KEY, d DATE, t DATETIME, ok DATE)")
        cur.execute("INSERT INTO z VALUES (1, '2021-02-03', NULL, NULL)")
    conn.close()
    run = _run(tmp_path, mysql_url, mode="full")
    assert not [w for w in run["warnings"] if "written as NULL" in w]
