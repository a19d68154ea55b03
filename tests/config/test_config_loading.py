"""Happy paths: the example config, URL resolution, tuning, compression, templating, overrides."""

from __future__ import annotations

import logging
import shutil
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from rivet_core.config import (
    DestinationConfig,
    SourceConfig,
    load_config,
    parse_column_override,
    parse_size,
    render_destination,
)
from rivet_core.errors import ConfigError
from rivet_core.redact import redact_secrets

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def full_config(tmp_path, monkeypatch):
    """The example config copied to tmp_path together with its SQL file."""
    shutil.copytree(FIXTURES, tmp_path / "cfg")
    monkeypatch.setenv("RIVET_TEST_FULL_URL", "postgres://app:pw%40x@db.internal:5432/shop")
    return load_config(tmp_path / "cfg" / "full.yaml", {"tenant": "acme"})


# ------------------------------------------------------------------ the example config


def test_the_example_config_loads_with_every_block(full_config):
    cfg = full_config
    assert [e.name for e in cfg.exports] == ["orders", "events", "recent_logins"]
    assert cfg.parallel_exports is True
    assert cfg.config_path.is_absolute() and cfg.config_dir == cfg.config_path.parent
    assert cfg.state_path == cfg.config_dir / ".rivet_state.db"
    assert cfg.dagster.key_prefix_list == ["warehouse", "raw"]
    assert cfg.dagster.start_date == "2024-01-01"
    assert cfg.notifications.slack.on == ["failure", "schema_change"]
    assert cfg.notifications.webhook.timeout_s == 5
    orders = cfg.export("orders")
    assert orders.description == "All orders, snapshot"
    assert orders.table_parts == ("public", "orders")
    assert orders.resolved_query == "SELECT * FROM public.orders"
    assert orders.meta_columns.row_hash_columns == ["id", "amount"]
    assert orders.quality.null_ratio_max == {"customer_id": 0.1}
    assert orders.parquet.row_group_strategy == "fixed_memory"
    assert orders.dagster.schedule == "0 3 * * *" and orders.dagster.timezone == "Europe/Berlin"
    assert orders.max_file_size_bytes == 256 * 1024**2
    assert orders.chunk_size == 100_000 and orders.parallel == 1


def test_query_file_is_read_relative_to_the_config_and_params_applied(full_config):
    events = full_config.export("events")
    assert events.resolved_query == (
        "SELECT id, kind, updated_at, created_at FROM events WHERE tenant = 'acme'"
    )
    assert events.table_parts is None


def test_select_returns_exports_in_config_order(full_config):
    assert [e.name for e in full_config.select(["recent_logins", "orders"])] == [
        "orders",
        "recent_logins",
    ]
    assert len(full_config.select(None)) == 3


def test_yaml_core_schema_keeps_on_and_dates_as_strings(load, base):
    base["notifications"] = {"slack": {"webhook_url_env": "S", "on": ["degraded"]}}
    text = __import__("yaml").safe_dump(base).replace("'on'", "on")
    cfg = load(text + "dagster:\n  start_date: 2024-02-03\n")
    assert cfg.notifications.slack.on == ["degraded"]
    assert cfg.dagster.start_date == "2024-02-03"


def test_unquoted_numeric_password_keeps_its_exact_text(load, base):
    base["source"] = {"type": "mysql", "host": "db", "user": "u", "database": "d"}
    text = __import__("yaml").safe_dump(base) + ""
    text = text.replace("  user: u\n", "  user: u\n  password: 007\n")
    assert load(text).source.password == "007"


# ------------------------------------------------------------------ substitution


def test_params_win_over_environment(load, base, monkeypatch):
    monkeypatch.setenv("RIVET_TEST_BUCKET", "from-env")
    base["exports"][0]["destination"] = {"type": "s3", "bucket": "${RIVET_TEST_BUCKET}"}
    assert load(base).exports[0].destination.bucket == "from-env"
    cfg = load(base, params={"RIVET_TEST_BUCKET": "from-param"})
    assert cfg.exports[0].destination.bucket == "from-param"


def test_empty_placeholder_becomes_empty_string(load, base):
    base["exports"][0]["description"] = "a${}b"
    assert load(base).exports[0].description == "ab"


def test_unreferenced_param_only_warns(load, base, caplog):
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        load(base, params={"UNUSED_ONE": "1"})
    assert any("UNUSED_ONE" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ source URL resolution


def _source(**fields) -> SourceConfig:
    return SourceConfig.model_validate(fields)


def test_inline_url_is_normalised_to_postgresql_scheme(tmp_path):
    src = _source(type="postgres", url="postgres://u@h:5432/db")
    assert src.resolve_url(tmp_path) == "postgresql://u@h:5432/db"
    src = _source(type="postgres", url="postgresql+psycopg://u@h/db")
    assert src.resolve_url(tmp_path) == "postgresql://u@h/db"


@pytest.mark.parametrize("scheme", ["mysql", "mysql+pymysql", "mariadb", "mariadb+pymysql"])
def test_mysql_url_schemes_are_normalised(tmp_path, scheme):
    assert _source(type="mysql", url=f"{scheme}://u@h/db").resolve_url(tmp_path) == "mysql://u@h/db"


def test_url_env_is_read_at_resolve_time(tmp_path, monkeypatch):
    monkeypatch.setenv("RIVET_TEST_URL", "mysql+pymysql://u:pw@h:3306/db")
    assert _source(type="mysql", url_env="RIVET_TEST_URL").resolve_url(tmp_path) == (
        "mysql://u:pw@h:3306/db"
    )


def test_url_file_is_read_relative_to_config_dir_and_trimmed(tmp_path):
    (tmp_path / "db.url").write_text("  postgresql://u@h/db\n")
    assert (
        _source(type="postgres", url_file="db.url").resolve_url(tmp_path) == "postgresql://u@h/db"
    )


def test_structured_source_percent_encodes_user_and_password(tmp_path, monkeypatch):
    monkeypatch.setenv("RIVET_TEST_PW", "p@ss:w/rd-._~")
    src = _source(
        type="postgres", host="db", user="app user", database="shop", password_env="RIVET_TEST_PW"
    )
    url = src.resolve_url(tmp_path)
    assert url == "postgresql://app%20user:p%40ss%3Aw%2Frd-._~@db:5432/shop"
    assert "p@ss:w/rd" not in redact_secrets(f"oops {url} and p@ss:w/rd-._~")


def test_structured_mysql_uses_port_3306_by_default(tmp_path):
    src = _source(type="mysql", host="db", user="u", database="d")
    assert src.resolve_url(tmp_path) == "mysql://u@db:3306/d"


def test_sqlite_relative_url_is_relative_to_config_dir(load, base, tmp_path):
    base["source"] = {"type": "sqlite", "url": "sqlite:///data/app.db"}
    cfg = load(base)
    assert cfg.source_url() == f"sqlite:///{tmp_path}/data/app.db"
    assert cfg.source_url().startswith("sqlite:////")


def test_sqlite_absolute_url_is_kept(tmp_path):
    assert (
        _source(type="sqlite", url="sqlite:////var/x.db").resolve_url(tmp_path)
        == "sqlite:////var/x.db"
    )


def test_sqlite_structured_database_path_is_relative_to_config_dir(load, base, tmp_path):
    base["source"] = {"type": "sqlite", "database": "demo.db"}
    assert load(base).source_url() == f"sqlite:///{tmp_path}/demo.db"


def test_plaintext_password_warns_once_and_is_redacted(load, base, caplog):
    base["source"] = {
        "type": "postgres",
        "host": "db",
        "user": "u",
        "database": "d",
        "password": "Sup3rSecret",
    }
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        cfg = load(base)
        cfg.source_url()
        cfg.source_url()
    warnings = [r for r in caplog.records if "plain text" in r.getMessage()]
    assert len(warnings) == 1 and "password_env" in warnings[0].getMessage()
    assert "Sup3rSecret" not in warnings[0].getMessage()
    assert "Sup3rSecret" not in redact_secrets("connect failed: Sup3rSecret")


def test_password_inside_inline_url_warns(load, base, caplog):
    base["source"] = {"type": "postgres", "url": "postgresql://u:An0therSecret@h/db"}
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        load(base)
    assert any("url_env" in r.getMessage() for r in caplog.records)
    assert "An0therSecret" not in redact_secrets("An0therSecret")


# ------------------------------------------------------------------ tuning


def test_tuning_merges_source_then_export_over_the_profile(load, base):
    base["source"]["environment"] = "local"
    base["source"]["tuning"] = {"throttle_ms": 7, "max_retries": 5}
    base["exports"][0]["tuning"] = {"max_retries": 9, "profile": "safe"}
    cfg = load(base)
    tuning = cfg.exports[0].resolved_tuning(cfg.source)
    assert tuning.profile == "safe"
    assert (tuning.throttle_ms, tuning.max_retries, tuning.batch_size) == (7, 9, 2_000)


def test_local_environment_defaults_to_the_fast_profile(load, base):
    base["source"]["environment"] = "local"
    cfg = load(base)
    assert cfg.exports[0].resolved_tuning(cfg.source).profile == "fast"


def test_explicit_batch_size_disables_memory_sizing(load, base):
    base["exports"][0]["tuning"] = {"batch_size": 777}
    cfg = load(base)
    tuning = cfg.exports[0].resolved_tuning(cfg.source)
    assert tuning.batch_size == 777 and tuning.batch_size_memory_mb is None


# ------------------------------------------------------------------ compression


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ("zstd", 3)),
        ({"compression": "gzip"}, ("gzip", 6)),
        ({"compression": "gzip", "compression_level": 9}, ("gzip", 9)),
        ({"compression": "snappy"}, ("snappy", None)),
        ({"compression": "lz4"}, ("lz4", None)),
        ({"compression_profile": "none"}, ("none", None)),
        ({"compression_profile": "fast"}, ("snappy", None)),
        ({"compression_profile": "balanced"}, ("zstd", 3)),
        ({"compression_profile": "compact"}, ("zstd", 9)),
        ({"format": "csv"}, ("none", None)),
        ({"format": "csv", "compression": "none"}, ("none", None)),
    ],
)
def test_effective_compression(load, base, fields, expected):
    base["exports"][0].update(fields)
    assert load(base).exports[0].effective_compression() == expected


def test_profile_conflicting_with_explicit_compression_warns(load, base, caplog):
    base["exports"][0].update(compression="gzip", compression_profile="compact")
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        exp = load(base).exports[0]
    assert exp.effective_compression() == ("zstd", 9)
    assert any(
        "compression_profile: compact overrides compression: gzip" in r.getMessage()
        for r in caplog.records
    )


# ------------------------------------------------------------------ sizes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1024", 1024),
        ("512B", 512),
        ("64kb", 65536),
        ("1.5 MB", 1572864),
        ("2GB", 2 * 1024**3),
        (".5KB", 512),
    ],
)
def test_parse_size_accepts_units_case_insensitively(text, expected):
    assert parse_size(text) == expected


def test_unquoted_numeric_max_file_size_is_bytes(load, base):
    base["exports"][0]["max_file_size"] = 4096
    assert load(base).exports[0].max_file_size_bytes == 4096


# ------------------------------------------------------------------ templating


def test_render_destination_expands_date_export_and_table_but_keeps_run_id():
    dest = DestinationConfig(type="local", path="out/{export}/{date}/{run_id}", prefix="{table}_")
    now = datetime(2026, 3, 4, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    rendered = render_destination(dest, "orders", now)
    assert rendered.path == "out/orders/2026-03-05/{run_id}"
    assert rendered.prefix == "orders_"
    assert dest.path == "out/{export}/{date}/{run_id}"  # original untouched


def test_render_destination_treats_naive_now_as_utc():
    dest = DestinationConfig(type="s3", bucket="b", prefix="x/{date}/")
    assert render_destination(dest, "e", datetime(2025, 1, 2, 3)).prefix == "x/2025-01-02/"


def test_render_destination_rejects_unknown_tokens():
    dest = DestinationConfig(type="local", path="out/{partiton}")
    with pytest.raises(ConfigError) as info:
        render_destination(dest, "e", datetime.now(UTC))
    assert "'{partiton}'" in str(info.value) and "{run_id}" in str(info.value) and "{partition}" in str(info.value)


# ------------------------------------------------------------------ overrides


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("decimal(18,2)", pa.decimal128(18, 2)),
        ("NUMERIC( 38 , 0 )", pa.decimal128(38, 0)),
        ("decimal(39,4)", pa.decimal256(39, 4)),
        ("decimal(76,76)", pa.decimal256(76, 76)),
        ("Boolean", pa.bool_()),
        ("int2", pa.int16()),
        ("integer", pa.int32()),
        ("BIGINT", pa.int64()),
        ("real", pa.float32()),
        ("double precision", pa.float64()),
        ("float8", pa.float64()),
        ("varchar", pa.string()),
        ("bpchar", pa.string()),
        ("name", pa.string()),
        ("bytea", pa.binary()),
        ("blob", pa.binary()),
        ("date", pa.date32()),
        ("jsonb", pa.json_(pa.string())),
        ("uuid", pa.uuid()),
        ("timestamp", pa.timestamp("us")),
        ("timestamp_ns", pa.timestamp("ns")),
        ("timestamptz", pa.timestamp("us", "UTC")),
        ("timestamp_utc", pa.timestamp("us", "UTC")),
        ("timestamp_tz_ns", pa.timestamp("ns", "UTC")),
    ],
)
def test_parse_column_override(text, expected):
    assert parse_column_override(text) == expected


@pytest.mark.parametrize(
    "text", ["decimal(0,0)", "decimal(77,2)", "decimal(10,11)", "decimal", "decimal(a,b)"]
)
def test_parse_column_override_rejects_bad_decimals(text):
    with pytest.raises(ConfigError):
        parse_column_override(text, column="c")


def test_column_overrides_strip_the_table_qualifier(load, base):
    base["exports"][0]["columns"] = {
        "orders.id": "int8",
        "public.orders.ts": "timestamptz",
        "x": "uuid",
    }
    overrides = load(base).exports[0].column_overrides()
    assert overrides == {"id": pa.int64(), "ts": pa.timestamp("us", "UTC"), "x": pa.uuid()}


def test_resolved_query_strips_a_trailing_semicolon(load, base):
    del base["exports"][0]["table"]
    base["exports"][0]["query"] = "SELECT 1 AS x;\n"
    assert load(base).exports[0].resolved_query == "SELECT 1 AS x"


def test_local_destination_path_falls_back_to_prefix_then_dot():
    assert DestinationConfig(type="local", prefix="p").local_path == "p"
    assert DestinationConfig(type="local").local_path == "."


def test_example_fixture_is_self_contained():
    assert (FIXTURES / "full.yaml").exists() and (FIXTURES / "sql" / "events.sql").exists()
