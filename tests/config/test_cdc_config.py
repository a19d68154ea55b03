"""`mode: cdc` and its `cdc:` block (docs/config-reference.md `exports[].cdc`): what loads, the
defaults it resolves to, and each refusal with its stable fragment (rivet_core/config/cdc.py)."""

from __future__ import annotations

from typing import Any

from rivet_core.config.cdc_rules import captured_tables


def _cdc(base: dict[str, Any], **cdc: Any) -> dict[str, Any]:
    base["exports"][0]["mode"] = "cdc"
    if cdc:
        base["exports"][0]["cdc"] = cdc
    return base


def _second(base: dict[str, Any], name: str, **cdc: Any) -> None:
    export = dict(base["exports"][0], name=name, table=f"public.{name}")
    export["destination"] = {"type": "local", "path": f"./{name}"}
    export.pop("cdc", None)
    if cdc:
        export["cdc"] = cdc
    base["exports"].append(export)


def test_a_cdc_export_loads_with_rivets_defaults(load, base):
    export = load(_cdc(base)).exports[0]
    assert export.mode == "cdc"
    assert export.cdc is None  # the block is optional; the run resolves the defaults


def test_every_field_of_the_cdc_block_loads_and_resolves(load, base):
    export = load(_cdc(base, initial="snapshot", checkpoint="orders.ckpt", until_current=True,
                       slot="rivet_orders", publication="orders_pub", rollover=500)).exports[0]
    assert export.cdc.initial == "snapshot" and export.cdc.rollover == 500
    assert export.cdc.resolved_slot == "rivet_orders" and export.cdc.resolved_publication == "orders_pub"


def test_tables_multiplexes_several_tables_through_one_export(load, base):
    del base["exports"][0]["table"]
    base["exports"][0]["tables"] = ["public.orders", "public.users"]
    export = load(_cdc(base, slot="rivet_app")).exports[0]
    assert captured_tables(export) == ["public.orders", "public.users"]


def test_two_cdc_exports_on_the_default_slot_are_refused_naming_the_default(config_error, base):
    _cdc(base)
    _second(base, "users")
    message = config_error(base)
    assert "resolve to the same cdc.slot 'rivet_slot' (the default)" in message
    assert "'orders', 'users'" in message


def test_two_cdc_exports_spelling_the_same_slot_are_refused(config_error, base):
    _cdc(base, slot="s1")
    _second(base, "users", slot="s1")
    assert "resolve to the same cdc.slot 's1'" in config_error(base)


def test_two_cdc_exports_on_distinct_slots_but_one_checkpoint_are_refused(config_error, base):
    _cdc(base, slot="s1", checkpoint="a.ckpt")
    _second(base, "users", slot="s2", checkpoint="./a.ckpt")
    assert "resolve to the same cdc.checkpoint" in config_error(base)


def test_two_mysql_cdc_exports_on_the_default_server_id_are_refused(config_error, base):
    base["source"]["type"] = "mysql"
    _cdc(base, checkpoint="a.ckpt")
    _second(base, "users", checkpoint="b.ckpt")
    assert "resolve to the same cdc.server_id '4271' (the default)" in config_error(base)


def test_two_cdc_exports_with_their_own_slots_load(load, base):
    _cdc(base, slot="s1")
    _second(base, "users", slot="s2")
    assert [e.cdc.resolved_slot for e in load(base).exports] == ["s1", "s2"]


def test_the_cdc_block_without_mode_cdc_is_refused(config_error, base):
    base["exports"][0]["cdc"] = {"slot": "x"}
    assert "the `cdc:` block is only valid with `mode: cdc`" in config_error(base)


def test_cdc_on_a_query_is_refused(config_error, base):
    del base["exports"][0]["table"]
    base["exports"][0]["query"] = "SELECT 1"
    assert "mode: cdc captures a table's changes, not a query's" in config_error(_cdc(base))


def test_partition_by_is_still_refused_with_cdc(config_error, base):
    base["exports"][0]["partition_by"] = "created_at"
    base["exports"][0]["destination"]["path"] = "./out/{partition}"
    assert "partition_by is not compatible with `mode: cdc`" in config_error(_cdc(base))


def test_batch_knobs_are_refused_with_cdc_naming_the_key(config_error, base):
    base["exports"][0]["cursor_column"] = "updated_at"
    base["exports"][0]["max_file_size"] = "64MB"
    message = config_error(_cdc(base))
    assert "`cursor_column` is not compatible with mode: cdc" in message
    assert "`max_file_size` is not compatible with mode: cdc — CDC parts are cut by change count" in message


def test_table_and_tables_together_are_refused(config_error, base):
    base["exports"][0]["tables"] = ["a"]
    assert "set `table:` or `tables:`, not both" in config_error(_cdc(base))


def test_a_zero_rollover_is_refused(config_error, base):
    assert "rollover" in config_error(_cdc(base, rollover=0))


def test_server_id_on_postgres_is_refused(config_error, base):
    assert "cdc.server_id is a MySQL/MariaDB binlog setting" in config_error(_cdc(base, server_id=7))


def test_mysql_snapshot_without_a_checkpoint_is_refused(config_error, base):
    base["source"]["type"] = "mysql"
    assert "needs cdc.checkpoint" in config_error(_cdc(base, initial="snapshot"))


def test_streaming_forever_is_refused(config_error, base):
    assert "cdc.until_current: false (stream forever) is not supported" in config_error(
        _cdc(base, until_current=False))


def test_cdc_to_stdout_is_refused(config_error, base):
    base["exports"][0]["destination"] = {"type": "stdout"}
    assert "mode: cdc cannot write to stdout" in config_error(_cdc(base))
