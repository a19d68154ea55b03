"""The benchmark harness (benchmarks/, issue 5) at a tiny scale: it runs end to end against
the test servers, writes the docs-style report, and its correctness check really catches a
corrupted output (the check is what makes every number in docs/benchmarks.md trustworthy).

Only rivet methods and floors run here, so the peers' venv (.venv-bench) is not needed.
No wall-clock assertions: the numbers are whatever this shared machine gives.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from benchmarks import harness
from benchmarks.checksum import compare, file_checksums

ROWS = 2000
TEST_DB = "rivet_bench_test"  # not the benchmark's own database: its fixture stays intact


def _urls() -> tuple[str, str]:
    pg, my = os.environ.get("TEST_PG_DSN"), os.environ.get("TEST_MYSQL_DSN")
    if not pg or not my:
        pytest.fail("TEST_PG_DSN / TEST_MYSQL_DSN are not set — run the suite with `make test`",
                    pytrace=False)
    return pg, my


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pg, my = _urls()
    root = tmp_path_factory.mktemp("bench")
    report = root / "benchmarks.md"
    rc = harness.main([
        "--engines", "pg,mysql", "--tables", "orders", "--rows", str(ROWS), "--repeat", "1",
        "--warmup", "0", "--methods", "rivet_full,rivet_full_s3,rivet_chunked_par2,floor_psql_copy,floor_mariadb_client",
        "--pg-url", pg, "--mysql-url", my, "--output", str(report), "--results", str(root),
        "--work", str(root / "work"), "--keep-output", "--database", TEST_DB,
    ])
    return {"rc": rc, "report": report, "runs": root / "runs.jsonl", "work": root / "work"}  # type: ignore[dict-item]


def test_harness_writes_the_report_and_every_rivet_output_checks_out(bench_run: dict) -> None:
    assert bench_run["rc"] == 0
    text = bench_run["report"].read_text()
    for heading in ("## PostgreSQL → Parquet: `orders` (2,000 rows", "## MariaDB → Parquet: `orders` (2,000 rows"):
        assert heading in text
    assert "| method | what | wall s (runs) | rows/s | MB/s | ×floor | peak RSS MB |" in text
    assert "Machine: " in text and "Command: `python -m benchmarks" in text
    runs = [json.loads(line) for line in bench_run["runs"].read_text().splitlines()]
    assert {(r["engine"], r["method"]) for r in runs} == {
        ("pg", "rivet_full"), ("pg", "rivet_chunked_par2"), ("pg", "floor_psql_copy"),
        ("mysql", "rivet_full"), ("mysql", "rivet_chunked_par2"), ("mysql", "floor_mariadb_client"),
        ("pg", "rivet_full_s3"), ("mysql", "rivet_full_s3"),
    }
    for r in runs:
        assert r["rc"] == 0, r.get("error")
        assert r["peak_rss_mb"] and r["peak_rss_mb"] > 0
        if r["engine"] == "pg":  # the private PostgreSQL runs here: its CPU is measured
            # (one run of the tiny fixture can cost the server less than a clock tick: 0.0)
            assert r["server_cpu_s"] is not None and r["server_cpu_s"] >= 0
        if r["method"] == "rivet_full_s3":  # parts found in the bucket (then removed)
            assert r["output_bytes"] > 0
        elif r["kind"] == "rivet":
            assert r["verified"] is True, r.get("mismatch_detail")
            assert r["output_bytes"] > 0
    assert sum(r["server_cpu_s"] for r in runs if r["engine"] == "pg") > 0  # and it adds up to something
    for engine in ("pg", "mysql"):  # every S3 run's objects were removed after it
        assert harness.remove_s3_prefix(harness.s3_prefix(bench_run["work"] / f"{engine}-orders-rivet_full_s3-r0")) == 0
    # The table rows carry the check verdict of every rivet method.
    rivet_rows = [line for line in text.splitlines() if line.startswith("| rivet_")]
    assert len(rivet_rows) == 6
    assert all(line.rstrip().endswith("| ok |") for line in rivet_rows if "rivet_full_s3" not in line)
    assert "CPU s client + server" in text and "export to the S3 server =" in text


def _rivet_output(bench_run: dict, engine: str) -> list[Path]:
    out = bench_run["work"] / f"{engine}-orders-rivet_full-r0"
    files = harness.data_files(out)
    assert files, f"no output kept under {out}"
    return files


def _source_checksums(engine: str) -> dict[str, str]:
    pg, my = _urls()
    admin = pg if engine == "pg" else my
    url = urllib.parse.urlunsplit(urllib.parse.urlsplit(admin)._replace(path="/" + TEST_DB))
    return harness.table_facts(engine, url, "orders")["checksums"]


@pytest.mark.parametrize("engine", ["pg", "mysql"])
def test_the_check_detects_a_corrupted_output(bench_run: dict, engine: str, tmp_path: Path) -> None:
    source = _source_checksums(engine)
    files = _rivet_output(bench_run, engine)
    assert compare(source, file_checksums(files, "orders")) == []

    table = pa.concat_tables([pq.read_table(f) for f in files])
    corruptions = {
        # one character of one note
        "note": lambda t: t.set_column(t.schema.get_field_index("note"), "note", pa.array(
            [v + "x" if i == 7 else v for i, v in enumerate(t.column("note").to_pylist())],
            type=t.schema.field("note").type)),
        # one microsecond on one timestamp
        "created_at": lambda t: t.set_column(t.schema.get_field_index("created_at"), "created_at",
            pc.add(t.column("created_at"), pa.array(
                [pa.scalar(1 if i == 3 else 0, pa.duration("us")).as_py() for i in range(t.num_rows)],
                type=pa.duration("us")))),
        # a lost row
        "rows": lambda t: t.slice(1),
    }
    for column, corrupt in corruptions.items():
        bad = corrupt(table)
        path = tmp_path / f"{column}.parquet"
        pq.write_table(bad, path)
        mismatch = compare(source, file_checksums([path], "orders"))
        assert column in mismatch, (column, mismatch)


def test_slow_peers_get_their_own_round_count() -> None:
    from argparse import Namespace

    from benchmarks.harness import SLOW_METHODS, slow_repeat

    assert {"dlt_pyarrow", "pandas_read_sql"} <= SLOW_METHODS
    assert slow_repeat(Namespace(repeat=3, slow_repeat=None)) == 3
    assert slow_repeat(Namespace(repeat=3, slow_repeat=1)) == 1
    assert slow_repeat(Namespace(repeat=3, slow_repeat=9)) == 3  # never more than --repeat
    assert slow_repeat(Namespace(repeat=3, slow_repeat=0)) == 1  # at least one


def test_the_recorded_command_never_holds_a_password() -> None:
    from benchmarks.harness import bench_command

    recorded = bench_command(["--pg-url", "postgresql://u:pg-s3cret@h:5432/db",
                              "--mysql-url", "mysql://root:my-s3cret@h:3306/mysql", "--scale", "1"])
    assert "s3cret" not in recorded
    assert recorded.startswith("python -m benchmarks --pg-url postgresql://") and "--scale 1" in recorded
