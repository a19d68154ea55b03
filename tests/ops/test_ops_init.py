"""`rivet init` against real PostgreSQL, MariaDB and SQLite schemas with a mix of tables:
the generated config loads, the heuristics pick the expected mode per table, `rivet run`
succeeds on it unchanged, and the re-read outputs hold every source row."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest
import yaml

from rivet_core.config import load_config
from tests.helpers import db_exec, manifest_table
from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process
from tests.ops.conftest import CHUNK, SMALL_ROWS, make_mysql_mix, make_pg_mix

EXPECTED = {
    "small_t": ("full", {}),
    "big_int": ("chunked", {"chunk_column": "id", "chunk_checkpoint": True}),
    "uuid_t": ("chunked", {"chunk_by_key": "id", "chunk_checkpoint": True}),
    "events": ("incremental", {"cursor_column": "updated_at"}),
}


def _with_password(url: str, password: str) -> str:
    """The test PostgreSQL trusts local connections, so any password is accepted — which lets
    the test prove that a password in the URL never reaches the generated file."""
    parts = urllib.parse.urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _init(tmp_path: Path, url: str, *extra: str) -> tuple[Path, object]:
    out = tmp_path / "rivet.yaml"
    result = rivet("init", "--source-env", "OPS_SRC_URL", "-o", str(out), "--small-rows", SMALL_ROWS,
                   "--chunk-size", CHUNK, *extra, env={"OPS_SRC_URL": url})
    return out, result


def _exports(path: Path) -> dict[str, dict]:
    return {e["name"]: e for e in yaml.safe_load(path.read_text())["exports"]}


def _assert_modes(exports: dict[str, dict], expected: dict) -> None:
    for name, (mode, fields) in expected.items():
        assert exports[name]["mode"] == mode, (name, exports[name])
        for key, value in fields.items():
            assert exports[name][key] == value, (name, key, exports[name])


def _run_and_compare(config: Path, url: str, counts: dict[str, int]) -> None:
    result = rivet("run", "-c", str(config), env={"OPS_SRC_URL": url})
    assert result.returncode == 0, result.stderr
    for name, expected in counts.items():
        table = manifest_table(config.parent / "output" / name)
        assert table.num_rows == expected, (name, table.num_rows, expected)


def test_init_postgres_mix_loads_picks_modes_and_runs(tmp_path: Path, pg_url: str) -> None:
    make_pg_mix(pg_url)
    secret_url = _with_password(pg_url, "s3cret-Pw-77")
    config, result = _init(tmp_path, secret_url)
    assert result.returncode == 0, result.stderr
    text = config.read_text()
    assert "url_env: OPS_SRC_URL" in text
    assert "s3cret-Pw-77" not in text and "s3cret-Pw-77" not in result.stderr
    assert "\ndagster:\n  group:" in text
    # the database's name, from the file rather than the variable (Dagster's asset keys, issue 34)
    assert load_config(str(config)).source.database == pg_url.rsplit("/", 1)[-1]
    exports = _exports(config)
    _assert_modes(exports, {**EXPECTED, "money_t": ("full", {})})
    assert exports["money_t"]["columns"] == {"amount": "decimal(38,18)"}
    money_line = next(line for line in text.splitlines() if line.strip().startswith("amount:"))
    assert "# REVIEW" in money_line
    counts = {name: db_exec(pg_url, f"SELECT count(*) FROM {name}")[0][0] for name in exports}
    _run_and_compare(config, secret_url, counts)


def test_init_mariadb_mix_loads_picks_modes_and_runs(tmp_path: Path, mysql_url: str) -> None:
    make_mysql_mix(mysql_url)
    config, result = _init(tmp_path, mysql_url)
    assert result.returncode == 0, result.stderr
    load_config(str(config))
    exports = _exports(config)
    _assert_modes(exports, EXPECTED)
    assert "columns" not in exports["big_int"]  # DECIMAL(12,2) maps exactly: no override
    counts = {name: db_exec(mysql_url, f"SELECT count(*) FROM {name}")[0][0] for name in exports}
    _run_and_compare(config, mysql_url, counts)


def test_init_sqlite_mix_and_schema_globs(tmp_path: Path, sqlite_mix: str) -> None:
    config, result = _init(tmp_path, sqlite_mix, "--include", "*_t", "--include", "big*",
                           "--exclude", "small*")
    assert result.returncode == 0, result.stderr
    exports = _exports(config)
    assert sorted(exports) == ["big_int"]  # events: not included; small_t: excluded
    config, result = _init(tmp_path, sqlite_mix, "--force")
    assert result.returncode == 0, result.stderr
    exports = _exports(config)
    _assert_modes(exports, {k: v for k, v in EXPECTED.items() if k != "uuid_t"})
    import sqlite3

    path = sqlite_mix.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        counts = {n: conn.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in exports}
    _run_and_compare(config, sqlite_mix, counts)


def test_init_refuses_to_overwrite_without_force(tmp_path: Path, sqlite_mix: str) -> None:
    out = tmp_path / "rivet.yaml"
    out.write_text("# mine\n")
    _, result = _init(tmp_path, sqlite_mix)
    assert result.returncode == 1
    assert "already exists" in result.stderr and "--force" in result.stderr
    assert out.read_text() == "# mine\n"
    _, result = _init(tmp_path, sqlite_mix, "--force")
    assert result.returncode == 0, result.stderr
    assert "url_env: OPS_SRC_URL" in out.read_text()


def test_init_single_table_and_missing_env(tmp_path: Path, sqlite_mix: str) -> None:
    _, result = _init(tmp_path, sqlite_mix, "--table", "events")
    assert result.returncode == 0, result.stderr
    assert list(_exports(tmp_path / "rivet.yaml")) == ["events"]
    result = rivet("init", "--source-env", "OPS_UNSET_VAR_X", "-o", str(tmp_path / "x.yaml"))
    assert result.returncode == 1
    assert "OPS_UNSET_VAR_X" in result.stderr and "is not set" in result.stderr


@pytest.mark.parametrize("rows, mode", [("10", "chunked"), ("100000", "full")])
def test_small_rows_threshold_decides_full_vs_chunked(tmp_path: Path, sqlite_mix: str, rows: str,
                                                       mode: str) -> None:
    out = tmp_path / "rivet.yaml"
    result = rivet("init", "--source-env", "OPS_SRC_URL", "-o", str(out), "--table", "big_int",
                   "--small-rows", rows, env={"OPS_SRC_URL": sqlite_mix})
    assert result.returncode == 0, result.stderr
    assert _exports(out)["big_int"]["mode"] == mode


def test_init_s3_destination_runs_unchanged(tmp_path: Path, sqlite_mix: str, s3) -> None:  # noqa: ANN001
    out = tmp_path / "rivet.yaml"
    result = rivet("init", "--source-env", "OPS_SRC_URL", "-o", str(out), "--table", "small_t",
                   "--s3-bucket", s3.bucket, "--s3-prefix", "raw", "--s3-region", "us-east-1",
                   "--s3-endpoint", s3.endpoint, "--s3-access-key-env", "RIVET_TEST_AK",
                   "--s3-secret-key-env", "RIVET_TEST_SK", env={"OPS_SRC_URL": sqlite_mix})
    assert result.returncode == 0, result.stderr
    dest = _exports(out)["small_t"]["destination"]
    assert dest["type"] == "s3" and dest["prefix"] == "raw/small_t/"
    assert s3.secret_key not in out.read_text()
    result = rivet("run", "-c", str(out), env={"OPS_SRC_URL": sqlite_mix})
    assert result.returncode == 0, result.stderr
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=s3.bucket)["Contents"]]
    assert "raw/small_t/_SUCCESS" in keys and any(k.endswith(".parquet") for k in keys)


def test_init_postgres_other_schema_with_globs_qualifies_tables(tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE SCHEMA sales",
            "CREATE TABLE sales.orders (id int PRIMARY KEY, total numeric(10,2))",
            "CREATE TABLE sales.order_lines (id int PRIMARY KEY, qty int)",
            "CREATE TABLE sales.tmp_scratch (x int)",
            "CREATE TABLE public.orders (id int PRIMARY KEY)",
            "INSERT INTO sales.orders VALUES (1, 9.99), (2, 19.50)")
    config, result = _init(tmp_path, pg_url, "--schema", "sales", "--include", "order*",
                           "--exclude", "*lines")
    assert result.returncode == 0, result.stderr
    exports = _exports(config)
    assert list(exports) == ["orders"] and exports["orders"]["table"] == "sales.orders"
    result = rivet("run", "-c", str(config), env={"OPS_SRC_URL": pg_url})
    assert result.returncode == 0, result.stderr
    assert manifest_table(config.parent / "output" / "orders").num_rows == 2


def test_generated_dagster_block_builds_definitions(tmp_path: Path, sqlite_mix: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    config, result = _init(tmp_path, sqlite_mix)
    assert result.returncode == 0, result.stderr
    monkeypatch.setenv("OPS_SRC_URL", sqlite_mix)
    from rivet_dagster import build_definitions

    defs = build_definitions(str(config))
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"small_t", "big_int", "events"} <= keys
    assert {s.name for s in defs.schedules or []} >= {"small_t_schedule", "events_schedule"}
