"""The bad-input catalogue (docs/config-reference.md "Errors, for real"): one test per rule, asserting the stable substring.

Each test writes a YAML file, calls `load_config` and checks that a `ConfigError` with exit
code 1 comes back whose message carries the catalogue's quoted fragment (the
`config_error` fixture asserts the type and the exit code).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.config import load_config
from rivet_core.errors import ConfigError

# ------------------------------------------------------------------ 1. malformed YAML


def test_malformed_yaml_with_tabs_hints_to_replace_tabs(config_error):
    message = config_error("source:\n\ttype: postgres\nexports: []\n")
    assert "invalid YAML" in message
    assert "replace tabs with spaces" in message


def test_unquoted_brace_value_that_breaks_yaml_hints_to_quote_it(config_error, base):
    text = (
        "source: {type: postgres, url_env: U}\n"
        "exports:\n  - name: a\n    table: t\n    format: parquet\n"
        "    destination:\n      type: local\n      path: {date}/out\n"
    )
    assert "values with { } must be quoted" in config_error(text)


def test_unquoted_brace_value_that_parses_as_a_mapping_hints_to_quote_it(config_error, base):
    text = (
        "source: {type: postgres, url_env: U}\n"
        "exports:\n  - name: a\n    table: t\n    format: parquet\n"
        "    destination:\n      type: local\n      path: {date}\n"
    )
    message = config_error(text)
    assert "`path` at exports[0].destination must be a string" in message
    assert "values with { } must be quoted" in message


def test_duplicate_yaml_key_is_rejected_instead_of_last_one_winning(config_error):
    message = config_error("source: {type: postgres, url_env: U}\nsource: {type: mysql}\n")
    assert "duplicate key `source`" in message


def test_missing_config_file_suggests_rivet_init(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert "not found" in str(info.value) and "rivet init" in str(info.value)
    assert info.value.exit_code == 1


def test_a_config_that_is_a_list_is_rejected(config_error):
    assert "must be a YAML mapping" in config_error("- a\n- b\n")


def test_an_empty_config_file_is_rejected(config_error):
    assert "is empty" in config_error("# nothing\n")


# ------------------------------------------------------------------ 2. missing fields


def test_missing_source_mentions_rivet_init(config_error, base):
    del base["source"]
    message = config_error(base)
    assert "missing field `source`" in message and "rivet init" in message


@pytest.mark.parametrize(
    ("path", "field", "where"),
    [
        ((), "exports", "top level"),
        (("exports", 0), "name", "exports[0]"),
        (("exports", 0), "format", "exports[0]"),
        (("exports", 0), "destination", "exports[0]"),
        (("exports", 0, "destination"), "type", "exports[0].destination"),
    ],
)
def test_missing_required_field_names_field_and_location(config_error, base, path, field, where):
    node = base
    for part in path:
        node = node[part]
    del node[field]
    assert f"missing field `{field}` at {where}" in config_error(base)


# ------------------------------------------------------------------ 3. unknown keys


def test_unknown_destination_key_suggests_the_close_field(config_error, base):
    base["exports"][0]["destination"]["acccess_key_env"] = "AK"
    message = config_error(base)
    assert (
        "unknown field `acccess_key_env` at exports[0].destination. "
        "Did you mean `access_key_env`?" in message
    )


def test_unknown_top_level_key_is_rejected_without_a_wild_guess(config_error, base):
    base["mystery_key"] = 1
    message = config_error(base)
    assert "unknown field `mystery_key` at top level" in message
    assert "Did you mean" not in message


def test_unknown_export_key_is_rejected(config_error, base):
    base["exports"][0]["nonsense_export_field"] = True
    assert "unknown field `nonsense_export_field` at exports[0]" in config_error(base)


@pytest.mark.parametrize(
    ("block", "key", "typo", "fix"),
    [
        (("source",), "tuning", {"batch_sise": 5}, "batch_size"),
        (("exports", 0), "quality", {"row_count_mn": 1}, "row_count_min"),
        (("exports", 0), "meta_columns", {"exported": True}, "exported_at"),
        (("exports", 0), "parquet", {"row_group_strategi": "auto"}, "row_group_strategy"),
        (("source",), "tls", {"mod": "require"}, "mode"),
        (("exports", 0), "dagster", {"schedulle": "0 3 * * *"}, "schedule"),
    ],
)
def test_unknown_key_in_nested_block_suggests_the_close_field(
    config_error, base, block, key, typo, fix
):
    node = base
    for part in block:
        node = node[part]
    node[key] = typo
    assert f"Did you mean `{fix}`?" in config_error(base)


def test_several_parse_problems_are_reported_together_numbered(config_error, base):
    base["mystery_key"] = 1
    base["exports"][0]["format"] = "avro"
    message = config_error(base)
    assert "2 problems in config" in message
    assert "1. " in message and "2. " in message


# ------------------------------------------------------------------ 4. bad enum values


@pytest.mark.parametrize(
    ("path", "field", "value", "expected"),
    [
        (("exports", 0), "mode", "gibberish", "full, incremental, chunked, time_window, cdc"),
        (("exports", 0), "format", "avro", "parquet, csv"),
        (("exports", 0), "compression", "brotli", "zstd, snappy, gzip, lz4, none"),
        (("exports", 0), "on_schema_drift", "x", "warn, continue, fail"),
        (("exports", 0, "destination"), "type", "ftp", "local, s3, gcs, azure, stdout"),
        (("exports", 0), "time_column_type", "ms", "timestamp, unix"),
        (("source",), "type", "oracle", "postgres, mysql, sqlite"),
    ],
)
def test_bad_enum_value_lists_the_valid_variants(config_error, base, path, field, value, expected):
    node = base
    for part in path:
        node = node[part]
    node[field] = value
    message = config_error(base)
    assert f"unknown variant `{value}` for `{field}`" in message
    assert f"expected one of: {expected}" in message


def test_bad_tuning_profile_is_an_unknown_variant(config_error, base):
    base["source"]["tuning"] = {"profile": "turbo"}
    assert "unknown variant `turbo` for `profile` at source.tuning" in config_error(base)


# ------------------------------------------------------------------ 5, 6. exports list


def test_empty_exports_list_is_rejected_with_code(write):
    path = write("source: {type: postgres, url_env: U}\nexports: []\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "at least one export must be defined" in str(info.value)
    assert info.value.code == "RIVET_CONFIG_NO_EXPORTS"


def test_duplicate_export_names_are_rejected_with_code(write, base):
    base["exports"].append(dict(base["exports"][0]))
    with pytest.raises(ConfigError) as info:
        load_config(write(base))
    assert "duplicate export name 'orders'" in str(info.value)
    assert info.value.code == "RIVET_CONFIG_DUPLICATE_EXPORT"


# ------------------------------------------------------------------ 7. substitution


def test_unresolved_placeholder_tells_how_to_provide_it(config_error, monkeypatch):
    monkeypatch.delenv("RIVET_TEST_NOPE", raising=False)
    message = config_error("source: {type: postgres, url_env: ${RIVET_TEST_NOPE}}\n")
    assert "'${RIVET_TEST_NOPE}' in the config is unresolved" in message
    assert "-p RIVET_TEST_NOPE=value" in message


def test_unresolved_placeholder_inside_a_comment_is_still_an_error(config_error, monkeypatch):
    monkeypatch.delenv("RIVET_TEST_NOPE", raising=False)
    assert "unresolved" in config_error("# uses ${RIVET_TEST_NOPE}\nsource: {}\n")


def test_param_value_with_nul_byte_is_rejected(config_error):
    message = config_error("source: {type: postgres, url_env: ${X}}\n", params={"X": "a\x00b"})
    assert "NUL" in message


# ------------------------------------------------------------------ 8. misplaced tuning


def test_tuning_knob_directly_under_source_belongs_under_source_tuning(config_error, base):
    base["source"]["batch_size"] = 5000
    base["source"]["throttle_ms"] = 5
    message = config_error(base)
    assert "source: field(s) [batch_size, throttle_ms] belong under 'source.tuning:'" in message


def test_tuning_knob_directly_on_export_belongs_under_export_tuning(config_error, base):
    base["exports"][0]["max_retries"] = 2
    message = config_error(base)
    assert (
        "export 'orders' (index 0): field(s) [max_retries] belong under 'exports[].tuning:'"
        in message
    )


# ------------------------------------------------------------------ 9–13. source


def test_source_without_connection_method_lists_the_options(config_error, base):
    base["source"] = {"type": "postgres"}
    message = config_error(base)
    assert "source: no connection method configured" in message
    assert "url_env" in message and "url_file" in message and "host" in message


def test_sqlite_source_without_database_has_no_connection_method(config_error, base):
    base["source"] = {"type": "sqlite"}
    assert "no connection method configured" in config_error(base)


def test_two_url_fields_are_rejected(config_error, base):
    base["source"]["url"] = "postgresql://h/db"
    assert "specify exactly one of 'url', 'url_env', or 'url_file' (got 2 set" in config_error(base)


def test_url_and_structured_fields_together_are_rejected(config_error, base):
    base["source"]["host"] = "db"
    message = config_error(base)
    assert "pick either URL-based config" in message and "not both" in message


@pytest.mark.parametrize("missing", ["host", "user", "database"])
def test_structured_source_missing_a_field_names_it(config_error, base, missing):
    source = {"type": "mysql", "host": "db", "user": "app", "database": "shop"}
    del source[missing]
    base["source"] = source
    assert f"structured config is missing '{missing}'" in config_error(base)


def test_password_and_password_env_together_are_rejected(config_error, base):
    base["source"] = {
        "type": "postgres",
        "host": "db",
        "user": "u",
        "database": "d",
        "password": "hunter2!",
        "password_env": "PGPASS",
    }
    message = config_error(base)
    assert "specify 'password' OR 'password_env', not both" in message
    assert "hunter2!" not in message


def test_inline_url_scheme_must_match_source_type(config_error, base):
    base["source"] = {"type": "postgres", "url": "mysql://u@h/db"}
    assert "does not match source.type 'postgres'" in config_error(base)


# ------------------------------------------------------------------ 14. batch size exclusivity


def test_batch_size_and_memory_target_in_source_tuning_are_mutually_exclusive(config_error, base):
    base["source"]["tuning"] = {"batch_size": 1000, "batch_size_memory_mb": 32}
    assert "mutually exclusive" in config_error(base)


def test_batch_size_and_memory_target_in_export_tuning_are_mutually_exclusive(config_error, base):
    base["exports"][0]["tuning"] = {"batch_size": 1000, "batch_size_memory_mb": 32}
    assert (
        "export 'orders': tuning.batch_size and tuning.batch_size_memory_mb are mutually exclusive"
        in config_error(base)
    )


def test_batch_size_and_memory_target_merged_across_levels_are_mutually_exclusive(
    config_error, base
):
    base["source"]["tuning"] = {"batch_size_memory_mb": 32}
    base["exports"][0]["tuning"] = {"batch_size": 1000}
    message = config_error(base)
    assert "export 'orders': batch_size (from exports[].tuning)" in message
    assert "mutually exclusive once merged" in message


# ------------------------------------------------------------------ 15. TLS


@pytest.mark.parametrize("knob", ["accept_invalid_certs", "accept_invalid_hostnames"])
def test_tls_enforced_mode_with_accept_invalid_is_rejected(config_error, base, knob):
    base["source"]["tls"] = {"mode": "verify-full", knob: True}
    assert f"source.tls: {knob} disables" in config_error(base)


def test_tls_accept_invalid_certs_message_matches_the_catalogue(config_error, base):
    base["source"]["tls"] = {"mode": "verify-ca", "accept_invalid_certs": True}
    assert "source.tls: accept_invalid_certs disables certificate verification" in config_error(
        base
    )


def test_tls_accept_invalid_without_explicit_mode_is_allowed(load, base):
    base["source"]["tls"] = {"accept_invalid_certs": True}
    assert load(base).source.tls.accept_invalid_certs is True


# ------------------------------------------------------------------ 16. connect-time source errors


def test_unset_url_env_is_reported_at_resolve_time(load, base, monkeypatch):
    monkeypatch.delenv("RIVET_TEST_DB_URL", raising=False)
    cfg = load(base)
    with pytest.raises(ConfigError) as info:
        cfg.source_url()
    assert "env var 'RIVET_TEST_DB_URL' is not set (referenced by url_env)" in str(info.value)
    assert "export RIVET_TEST_DB_URL=..." in str(info.value)


def test_unset_password_env_is_reported_at_resolve_time(load, base, monkeypatch):
    monkeypatch.delenv("RIVET_TEST_PW", raising=False)
    base["source"] = {
        "type": "postgres",
        "host": "db",
        "user": "u",
        "database": "d",
        "password_env": "RIVET_TEST_PW",
    }
    with pytest.raises(ConfigError) as info:
        load(base).source_url()
    assert "env var 'RIVET_TEST_PW' is not set (referenced by password_env)" in str(info.value)


def test_unreadable_url_file_is_reported_at_resolve_time(load, base):
    base["source"] = {"type": "postgres", "url_file": "secrets/missing.url"}
    with pytest.raises(ConfigError) as info:
        load(base).source_url()
    assert "cannot read url_file" in str(info.value) and "missing.url" in str(info.value)


# ------------------------------------------------------------------ 17. export names


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "a\\b", "a..b", "nul\x00"])
def test_export_name_that_is_not_filename_safe_is_rejected(config_error, base, name):
    base["exports"][0]["name"] = name
    assert "is not filename-safe" in config_error(base)


# ------------------------------------------------------------------ 18. what to read


def test_export_without_query_or_table_is_rejected(config_error, base):
    del base["exports"][0]["table"]
    assert (
        "export 'orders': specify exactly one of 'query', 'query_file', 'table', or 'tables'"
        in config_error(base)
    )


def test_export_with_query_and_table_is_rejected(config_error, base):
    base["exports"][0]["query"] = "SELECT 1"
    assert "(got 2 set" in config_error(base)


def test_tables_key_is_only_valid_with_mode_cdc(config_error, base):
    del base["exports"][0]["table"]
    base["exports"][0]["tables"] = ["a", "b"]
    assert "`tables:` is only valid with `mode: cdc`" in config_error(base)


# ------------------------------------------------------------------ 19. query_file


def _query_file_export(base, query_file):
    del base["exports"][0]["table"]
    base["exports"][0]["query_file"] = query_file
    return base


def test_absolute_query_file_is_rejected(config_error, base):
    assert "query_file must be a relative path" in config_error(
        _query_file_export(base, "/etc/q.sql")
    )


def test_query_file_with_dotdot_is_rejected(config_error, base):
    message = config_error(_query_file_export(base, "sql/../../q.sql"))
    assert "query_file path must not contain '..'" in message


def test_query_file_symlink_escaping_the_config_dir_is_rejected(config_error, base, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}_outside.sql"
    outside.write_text("SELECT 1")
    (tmp_path / "q.sql").symlink_to(outside)
    try:
        assert "resolves outside the config directory" in config_error(
            _query_file_export(base, "q.sql")
        )
    finally:
        outside.unlink()


def test_missing_query_file_is_rejected(config_error, base):
    message = config_error(_query_file_export(base, "sql/nope.sql"))
    assert "export 'orders': query_file 'sql/nope.sql' not found" in message


def test_query_file_with_unresolved_placeholder_names_the_file(
    config_error, base, tmp_path, monkeypatch
):
    monkeypatch.delenv("RIVET_TEST_NOPE", raising=False)
    (tmp_path / "q.sql").write_text("SELECT * FROM t WHERE x = '${RIVET_TEST_NOPE}'")
    message = config_error(_query_file_export(base, "q.sql"))
    assert "query_file 'q.sql' of export 'orders'" in message and "unresolved" in message


# ------------------------------------------------------------------ 20. table identifiers


def test_table_with_three_parts_is_rejected(config_error, base):
    base["exports"][0]["table"] = "db.public.orders"
    assert "must be `<name>` or `<schema>.<name>`" in config_error(base)


@pytest.mark.parametrize("table", ['"orders"', "orders;drop", "1orders", "public.", "my table"])
def test_table_with_bad_identifier_is_rejected(config_error, base, table):
    message = config_error(_with(base, table=table))
    assert "identifier" in message and "export 'orders'" in message


def _with(base, **fields):
    base["exports"][0].update(fields)
    return base


# ------------------------------------------------------------------ 22. row_hash


def test_row_hash_empty_list_attests_nothing(config_error, base):
    assert "empty list — that attests nothing" in config_error(
        _with(base, meta_columns={"row_hash": []})
    )


def test_row_hash_duplicate_column_is_rejected(config_error, base):
    assert "lists 'id' twice" in config_error(_with(base, meta_columns={"row_hash": ["id", "id"]}))


# ------------------------------------------------------------------ 23. qualified overrides


def test_qualified_override_for_another_table_does_not_capture(config_error, base):
    assert "does not capture" in config_error(_with(base, columns={"customers.id": "int8"}))


def test_qualified_override_on_a_query_export_needs_a_table_shaped_export(config_error, base):
    del base["exports"][0]["table"]
    assert "needs a table-shaped export" in config_error(
        _with(base, query="SELECT 1 AS id", columns={"orders.id": "int8"})
    )


def test_unknown_override_type_is_rejected_at_load(config_error, base):
    message = config_error(_with(base, columns={"amount": "money"}))
    assert "column override: unrecognised type 'money' for column 'amount'" in message
    assert "use one of:" in message


def test_decimal_override_needs_precision_and_scale(config_error, base):
    assert "needs both precision and scale" in config_error(
        _with(base, columns={"a": "decimal(10)"})
    )


# ------------------------------------------------------------------ 24–26. format / compression / size


@pytest.mark.parametrize("codec", ["zstd", "snappy", "gzip", "lz4"])
def test_csv_with_compression_is_rejected(config_error, base, codec):
    message = config_error(_with(base, format="csv", compression=codec))
    assert f"CSV output does not support compression: {codec}" in message


def test_csv_with_compression_profile_is_rejected(config_error, base):
    message = config_error(_with(base, format="csv", compression_profile="fast"))
    assert "CSV output does not support compression_profile" in message


@pytest.mark.parametrize(
    ("codec", "level", "expected"),
    [
        ("zstd", 0, "zstd compression_level must be 1..22"),
        ("zstd", 23, "zstd compression_level must be 1..22"),
        ("gzip", 10, "gzip compression_level must be 0..9"),
        ("snappy", 1, "compression_level is only supported for zstd and gzip"),
        ("lz4", 1, "compression_level is only supported for zstd and gzip"),
        ("none", 1, "compression_level is only supported for zstd and gzip"),
    ],
)
def test_compression_level_out_of_range_is_rejected(config_error, base, codec, level, expected):
    assert expected in config_error(_with(base, compression=codec, compression_level=level))


@pytest.mark.parametrize("size", ["0", "-5MB", "lots", "10 TB", "0.0001B"])
def test_invalid_max_file_size_is_rejected(config_error, base, size):
    assert f"invalid max_file_size '{size}'" in config_error(_with(base, max_file_size=size))


def test_stdout_destination_with_max_file_size_is_rejected(config_error, base):
    message = config_error(_with(base, max_file_size="1MB", destination={"type": "stdout"}))
    assert "stdout" in message and "max_file_size" in message


# ------------------------------------------------------------------ 27, 28. incremental


def test_incremental_without_cursor_column_is_rejected(config_error, base):
    assert "incremental mode requires cursor_column" in config_error(
        _with(base, mode="incremental")
    )


def test_coalesce_without_fallback_is_rejected(config_error, base):
    message = config_error(
        _with(base, mode="incremental", cursor_column="u", incremental_cursor_mode="coalesce")
    )
    assert "incremental_cursor_mode: coalesce requires cursor_fallback_column" in message


def test_fallback_without_coalesce_is_rejected(config_error, base):
    message = config_error(
        _with(base, mode="incremental", cursor_column="u", cursor_fallback_column="c")
    )
    assert "cursor_fallback_column is only valid with incremental_cursor_mode: coalesce" in message


# ------------------------------------------------------------------ 33. chunk knobs outside chunked


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("chunk_column", "id"),
        ("chunk_by_key", "id"),
        ("chunk_count", 4),
        ("chunk_size_memory_mb", 64),
        ("chunk_max_attempts", 3),
        ("chunk_checkpoint", True),
        ("keyset_incremental", True),
        ("chunk_size", 5000),
    ],
)
def test_chunk_knob_on_a_non_chunked_export_requires_mode_chunked(config_error, base, knob, value):
    assert f"`{knob}` requires `mode: chunked`" in config_error(_with(base, **{knob: value}))


def test_chunk_dense_outside_chunked_is_rejected(config_error, base):
    assert "chunk_dense is only valid with mode: chunked" in config_error(
        _with(base, chunk_dense=True)
    )


def test_chunk_by_days_outside_chunked_is_rejected(config_error, base):
    assert "chunk_by_days requires mode: chunked" in config_error(_with(base, chunk_by_days=7))


def test_chunked_mode_with_a_chunk_column_loads(load, base):
    config = load(_with(base, mode="chunked", chunk_column="id", chunk_size=5000, parallel=4))
    export = config.exports[0]
    assert export.mode == "chunked" and export.chunk_column == "id" and export.parallel == 4


@pytest.mark.parametrize(
    "knobs",
    [
        {},  # table: export without chunk_column → the planner auto-resolves the primary key
        {"chunk_by_key": "id", "chunk_checkpoint": True, "keyset_incremental": True},
        {"chunk_column": "id", "chunk_dense": True},
        {"chunk_column": "at", "chunk_by_days": 7},
        {"chunk_column": "id", "chunk_count": 8, "chunk_max_attempts": 2},
        {"chunk_size_memory_mb": 64},
    ],
)
def test_chunked_mode_loads_with_each_chunk_shape(load, base, knobs):
    export = load(_with(base, mode="chunked", **knobs)).exports[0]
    assert export.mode == "chunked"


def test_chunked_mode_is_no_longer_reported_as_not_supported(config_error, base):
    message = config_error(_with(base, mode="chunked", chunk_size=0))
    assert "requires chunk_size >= 1" in message
    assert "not supported yet" not in message


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        ({"parallel": 0}, "requires parallel >= 1"),
        ({"chunk_column": "id", "chunk_count": 0}, "chunk_count must be >= 1"),
        ({"chunk_column": "d", "chunk_by_days": 0}, "chunk_by_days must be at least 1"),
        ({"chunk_column": "id", "chunk_count": 2, "chunk_dense": True}, "mutually exclusive"),
        ({"chunk_column": "d", "chunk_count": 2, "chunk_by_days": 1}, "mutually exclusive"),
        ({"chunk_column": "d", "chunk_by_days": 1, "chunk_dense": True}, "cannot be combined"),
        ({"chunk_size_memory_mb": 64, "chunk_size": 500},
         "chunk_size and chunk_size_memory_mb are mutually exclusive"),
        ({"keyset_incremental": True}, "requires `chunk_by_key:`"),
    ],
)
def test_chunk_knob_rules_still_apply_in_chunked_mode(config_error, base, knobs, expected):
    assert expected in config_error(_with(base, mode="chunked", **knobs))


@pytest.mark.parametrize("knobs", [{}, {"chunk_dense": True}, {"chunk_count": 4}])
def test_chunked_query_export_without_a_chunk_column_needs_a_strategy(config_error, base, knobs):
    del base["exports"][0]["table"]
    base["exports"][0]["query"] = "SELECT * FROM orders"
    message = config_error(_with(base, mode="chunked", **knobs))
    assert (
        "chunked mode needs a chunking strategy. Pick one: chunk_column, chunk_by_key, "
        "chunk_dense, chunk_by_days or chunk_count" in message
    )


# ------------------------------------------------------------------ 36. partition_by


def _partitioned(base, **fields):
    base["exports"][0]["destination"] = {"type": "local", "path": "./out/{partition}"}
    return _with(base, **{"partition_by": "created_at", **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"partition_by": " "}, "partition_by must name a column"),
        ({"partition_by": "a/b"}, "partition_by 'a/b' is not filename-safe"),
        ({"partition_by": "a=b"}, "is not filename-safe"),
        ({"mode": "time_window", "time_column": "t", "days_window": 1},
         "partition_by is not compatible with `mode: time_window`"),
        ({"mode": "chunked", "chunk_by_key": "id"}, "partition_by is not compatible with chunk_by_key"),
        ({"mode": "chunked"}, "partition_by with mode: chunked needs chunk_column"),
        ({"mode": "chunked", "chunk_column": "id", "chunk_size_memory_mb": 8},
         "not compatible with chunk_size_memory_mb"),
    ],
)
def test_partition_by_rules(config_error, base, fields, expected):
    assert expected in config_error(_partitioned(base, **fields))


def test_partition_by_requires_the_partition_token(config_error, base):
    message = config_error(_with(base, partition_by="created_at"))
    assert "partition_by requires a '{partition}' token" in message


def test_partition_token_must_be_a_whole_segment(config_error, base):
    base["exports"][0]["destination"] = {"type": "s3", "bucket": "b", "prefix": "o/p{partition}/"}
    assert "must be a whole path segment" in config_error(_with(base, partition_by="created_at"))


def test_partition_token_without_partition_by(config_error, base):
    base["exports"][0]["destination"] = {"type": "local", "path": "./out/{partition}"}
    assert "has the '{partition}' token but partition_by is not set" in config_error(base)


@pytest.mark.parametrize("fields", [{}, {"mode": "incremental", "cursor_column": "updated_at"},
                                    {"mode": "chunked", "chunk_column": "id"},
                                    {"partition_granularity": "month"}])
def test_partition_by_combinations_rivet_accepts(load, base, fields):
    export = load(_partitioned(base, **fields)).exports[0]
    assert export.partition_by == "created_at"


# ------------------------------------------------------------------ 35. time_window


def test_time_window_without_time_column_is_rejected(config_error, base):
    assert "time_window mode requires time_column" in config_error(
        _with(base, mode="time_window", days_window=3)
    )


def test_time_window_without_days_window_is_rejected(config_error, base):
    assert "time_window mode requires days_window" in config_error(
        _with(base, mode="time_window", time_column="at")
    )


@pytest.mark.parametrize("days", [0, -1])
def test_time_window_with_non_positive_days_window_is_rejected(config_error, base, days):
    message = config_error(_with(base, mode="time_window", time_column="at", days_window=days))
    assert "days_window must be >= 1" in message


# ------------------------------------------------------------------ 38–42. destination


def test_non_loopback_endpoint_is_rejected(config_error, base):
    dest = {"type": "s3", "bucket": "b", "endpoint": "https://s3.evil.example.com"}
    message = config_error(_with(base, destination=dest))
    assert (
        "destination.endpoint 'https://s3.evil.example.com' points at a non-loopback host"
        in message
    )


@pytest.mark.parametrize(
    "endpoint",
    ["http://localhost:9000", "http://127.0.0.5:9000", "http://[::1]:9000", "127.0.0.1:9000"],
)
def test_loopback_endpoint_is_accepted(load, base, endpoint):
    dest = {"type": "s3", "bucket": "b", "endpoint": endpoint}
    assert load(_with(base, destination=dest)).exports[0].destination.endpoint == endpoint


def test_non_loopback_endpoint_with_allow_anonymous_is_accepted(load, base):
    dest = {
        "type": "s3",
        "bucket": "b",
        "endpoint": "https://minio.internal",
        "allow_anonymous": True,
    }
    assert load(_with(base, destination=dest)).exports[0].destination.allow_anonymous


@pytest.mark.parametrize("field", ["path", "prefix"])
def test_local_destination_with_dotdot_is_rejected(config_error, base, field):
    message = config_error(_with(base, destination={"type": "local", field: "out/../../etc"}))
    assert "local destination path must not contain a '..' component" in message


def test_s3_with_only_access_key_env_is_rejected(config_error, base):
    dest = {"type": "s3", "bucket": "b", "access_key_env": "AK"}
    assert "S3 requires both access_key_env and secret_key_env, or neither" in config_error(
        _with(base, destination=dest)
    )


def test_s3_without_bucket_is_rejected(config_error, base):
    assert "requires 'bucket'" in config_error(_with(base, destination={"type": "s3"}))


def test_gcs_and_azure_destinations_with_rivets_fields_load(load, base, tmp_path):
    (tmp_path / "sa.json").write_text("{}")
    gcs = {"type": "gcs", "bucket": "raw-bucket", "prefix": "raw/", "credentials_file": "sa.json"}
    assert load(_with(base, destination=gcs)).exports[0].destination.credentials_file == "sa.json"
    azure = {"type": "azure", "account_name": "acct", "bucket": "c", "prefix": "raw/",
             "sas_token_env": "AZ_SAS", "endpoint": "http://127.0.0.1:10000/acct"}
    assert load(_with(base, destination=azure)).exports[0].destination.account_name == "acct"
    default_chain = {"type": "azure", "account_name": "acct", "bucket": "c"}
    assert load(_with(base, destination=default_chain)).exports[0].destination.type == "azure"


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_gcs_and_azure_without_bucket_are_rejected(config_error, base, kind):
    dest = {"type": kind, "account_name": "acct"} if kind == "azure" else {"type": kind}
    message = config_error(_with(base, destination=dest))
    assert "requires 'bucket'" in message and "destination.bucket" in message


@pytest.mark.parametrize(("bucket", "why"), [
    ("Bad Bucket!", "lowercase letters, digits"), ("ab", "3-63 characters"), ("-lake", "start and end"),
    ("lake-", "start and end"), ("a" * 64, "3-63 characters"), ("192.168.0.1", "IP address"),
    ("google-lake", "'google'"), ("lake..raw", "dot-separated part"), ("Lake", "lowercase letters")])
def test_a_gcs_bucket_name_google_refuses_is_a_config_error_naming_the_field(config_error, base, bucket, why):
    message = config_error(_with(base, destination={"type": "gcs", "bucket": bucket}))
    assert f"destination.bucket {bucket!r} is not a valid GCS bucket name" in message and why in message
    assert "fix destination.bucket" in message


@given(st.text(alphabet="abcXYZ019-_. !/", min_size=1, max_size=70))
def test_every_gcs_bucket_name_the_config_accepts_passes_the_client_librarys_own_check(name):
    from google.cloud.storage._helpers import _validate_name

    from rivet_core.config.validate import gcs_bucket_problem

    if gcs_bucket_problem(name) is None:
        assert _validate_name(name) == name  # never the bare ValueError at the first request
        assert name == name.lower() and " " not in name


def test_gcs_credentials_file_must_exist_and_excludes_allow_anonymous(config_error, base):
    missing = {"type": "gcs", "bucket": "raw-bucket", "credentials_file": "nope.json"}
    assert "credentials_file 'nope.json' does not exist" in config_error(_with(base, destination=missing))
    both = {"type": "gcs", "bucket": "raw-bucket", "credentials_file": "nope.json", "allow_anonymous": True}
    assert "allow_anonymous: true and credentials_file contradict" in config_error(_with(base, destination=both))


def test_azure_needs_an_account_and_one_credential_at_most(config_error, base):
    no_account = {"type": "azure", "bucket": "c"}
    assert "requires 'account_name'" in config_error(_with(base, destination=no_account))
    both = {"type": "azure", "account_name": "a", "bucket": "c", "account_key_env": "K", "sas_token_env": "S"}
    assert "account_key_env or sas_token_env, not both" in config_error(_with(base, destination=both))
    anonymous = {"type": "azure", "account_name": "a", "bucket": "c", "account_key_env": "K",
                 "allow_anonymous": True}
    assert "allow_anonymous: true cannot be combined with account_key_env" in config_error(
        _with(base, destination=anonymous))


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_a_gcs_or_azure_endpoint_off_loopback_needs_allow_anonymous(config_error, base, kind):
    dest = {"type": kind, "bucket": "b", "account_name": "a", "endpoint": "http://10.0.0.5:4443"}
    if kind == "gcs":
        dest.pop("account_name")
    assert "points at a non-loopback host" in config_error(_with(base, destination=dest))


def test_unknown_template_token_in_destination_is_rejected_at_load(config_error, base):
    message = config_error(_with(base, destination={"type": "local", "path": "out/{dtae}"}))
    assert "unknown template token '{dtae}'" in message and "{date}" in message


# ------------------------------------------------------------------ notifications / dagster / misc


def test_slack_with_both_url_and_env_is_rejected(config_error, base):
    base["notifications"] = {
        "slack": {"webhook_url": "https://hooks.slack.com/x", "webhook_url_env": "S"}
    }
    assert "notifications.slack: set webhook_url or webhook_url_env, not both" in config_error(base)


def test_webhook_without_url_is_rejected(config_error, base):
    base["notifications"] = {"webhook": {"on": ["success"]}}
    assert "notifications.webhook: set url_env (recommended) or url" in config_error(base)


def test_slack_rejects_an_unknown_event(config_error, base):
    base["notifications"] = {"slack": {"webhook_url_env": "S", "on": ["success"]}}
    assert "unknown variant `success` for `on[0]` at notifications.slack" in config_error(base)


def test_dagster_block_rejects_unknown_keys(config_error, base):
    base["dagster"] = {"groop": "x"}
    assert "unknown field `groop` at dagster. Did you mean `group`?" in config_error(base)


def test_dagster_schedule_must_be_cron(config_error, base):
    assert "is not a cron expression" in config_error(_with(base, dagster={"schedule": "daily"}))


def test_dagster_start_date_must_be_iso(config_error, base):
    assert "use YYYY-MM-DD" in config_error(_with(base, dagster={"start_date": "01/02/2024"}))


def test_dagster_timezone_must_exist(config_error, base):
    assert "is not an IANA time zone" in config_error(
        _with(base, dagster={"timezone": "Mars/Olympus"})
    )


def test_unknown_export_name_lists_known_exports(load, base):
    cfg = load(base)
    with pytest.raises(ConfigError) as info:
        cfg.export("x")
    assert str(info.value) == "unknown export 'x'; known exports: orders"
    with pytest.raises(ConfigError):
        cfg.select(["orders", "x"])


def test_wrong_value_type_names_field_and_expected_type(config_error, base):
    message = config_error(_with(base, skip_empty=[1]))
    assert "`skip_empty` at exports[0] must be true or false (got a list)" in message


def test_password_never_appears_in_an_error(config_error, base):
    base["source"] = {"type": "postgres", "url": "postgresql://u:S3cr3t-pw@h/db", "host": "h"}
    message = config_error(base)
    assert "pick either URL-based config" in message
    assert "S3cr3t-pw" not in message
