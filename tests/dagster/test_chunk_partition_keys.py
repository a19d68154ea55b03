"""Chunk partition keys a person can read, and the padded keys of earlier instances still
naming their windows (rivet_dagster/partitions.py, docs/adr/0005 "Partition keys").

The codec is property-tested against the core's own window keys (rivet_core/chunks/keys.py);
the upgrade path runs a real chunked export on PostgreSQL through Dagster on an instance
that registered the padded keys, and the published export is re-read with pyarrow and
compared with the source table.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
from hypothesis import given
from hypothesis import strategies as st

from rivet_core import api
from rivet_dagster import build_definitions
from rivet_dagster.partition_keys import chunk_partition_key, chunk_window_key, readable_window_keys
from tests.dagster.support import Target, id_amounts, source_rows
from tests.dagster.test_chunk_freshness import (
    EXPORT,
    PARTITIONS,
    PUBLISH_JOB,
    Planner,
    assert_quiet,
    jobs,
    orders_chunked,
    published,
    requested,
)
from tests.helpers import db_exec

WIDE = 10**20 - 1  # the core keys bounds within ±(10^20 − 1)
columns = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ", min_size=1,
                  max_size=12)
bounds = st.integers(min_value=-WIDE, max_value=WIDE)


def padded(lo: int) -> str:
    """The key an instance registered for the window [lo, lo + 99] before the readable form."""
    return api.window_keys.range_key("id", lo, lo + 99)


@given(columns, bounds, bounds)
def test_a_range_window_reads_as_its_column_and_inclusive_bounds_and_both_forms_decode_to_it(
        column: str, a: int, b: int) -> None:
    lo, hi = min(a, b), max(a, b)
    window = api.window_keys.range_key(column, lo, hi)
    readable = chunk_partition_key(window)
    assert readable == f"{api.window_keys.safe_column(column)}_{lo}-{hi}"
    assert chunk_window_key(readable) == window  # the readable key names the window
    assert chunk_window_key(window) == window  # and so does the padded key an older instance holds
    assert api.window_keys.KEY_ALPHABET.match(readable) and "..." not in readable  # a valid Dagster key


@given(st.lists(st.integers(min_value=-WIDE, max_value=WIDE - 1), min_size=1, max_size=40, unique=True),
       st.integers(min_value=1, max_value=10**6))
def test_registering_the_windows_in_the_core_key_order_lists_the_readable_keys_in_window_order(
        starts: list[int], width: int) -> None:
    """The planner registers partitions in the order of the core's keys (ascending), which is
    the order Dagster lists a dynamic partitions definition in (creation order, the UI's
    default sort): so the readable keys appear in window order, old or new form alike."""
    windows = [api.window_keys.range_key("id", lo, min(lo + width - 1, WIDE)) for lo in starts]
    listed = [chunk_partition_key(w) for w in sorted(windows)]
    firsts = [api.window_keys.decode_int(chunk_window_key(k).split("_")[1].split("-")[0]) for k in listed]
    assert firsts == sorted(starts)
    assert [int(k[len("id_"):].split("-")[0]) if not k[len("id_"):].startswith("-") else
            -int(k[len("id_-"):].split("-")[0]) for k in listed] == sorted(starts)  # read off the key itself
    assert sorted(listed, key=chunk_window_key) == listed  # decoding restores the order from any listing


@given(st.integers(min_value=0, max_value=10**9 - 1), st.dates(min_value=dt.date(1900, 1, 1)),
       st.integers(min_value=1, max_value=400))
def test_keyset_windows_read_as_their_index_and_day_windows_keep_their_dates(
        index: int, day: dt.date, days: int) -> None:
    keyset = api.window_keys.keyset_key(index)
    assert chunk_partition_key(keyset) == f"p{index}"
    assert chunk_window_key(f"p{index}") == keyset == chunk_window_key(keyset)
    end = day + dt.timedelta(days=days)
    dated = api.window_keys.day_key(day, end)
    assert chunk_partition_key(dated) == dated == chunk_window_key(dated)  # `<first>_<end, exclusive>` as before


def test_a_refusal_of_the_core_names_the_windows_by_their_readable_keys() -> None:
    text = (f"run window(s) {padded(400)}, {padded(500)}, p000000042 (chunk run orders_chunked_20261207T201620.246; "
            "day 2024-01-29_2024-02-05)")
    assert readable_window_keys(text) == ("run window(s) id_400-499, id_500-599, p42 (chunk run "
                                          "orders_chunked_20261207T201620.246; day 2024-01-29_2024-02-05)")


def test_an_instance_holding_the_padded_keys_keeps_them_with_their_history_and_adds_new_windows_readable(
        orders_pg: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    db_exec(orders_pg, "DELETE FROM orders WHERE id >= 550")
    old_keys = [padded(lo) for lo in range(0, 600, 100)]
    instance.add_dynamic_partitions(PARTITIONS, old_keys)  # registered by an earlier version's planner
    target = Target("local", tmp_path)
    planner = Planner(build_definitions(orders_chunked(target, orders_pg)), instance)

    first = planner.tick()
    assert not first.dynamic_partitions_requests  # the windows are registered: nothing added, nothing withdrawn
    assert requested(first) == old_keys and jobs(first) == [PUBLISH_JOB]
    planner.run(first)
    _, table = published(target)
    assert id_amounts(table) == source_rows(orders_pg)
    chunk_key = dg.AssetKey(EXPORT)
    assert instance.get_materialized_partitions(chunk_key) == set(old_keys)
    assert_quiet(planner.tick())

    db_exec(orders_pg, """INSERT INTO orders SELECT g, 'new', g + 0.25, NULL,
                              timestamp '2026-04-01' + g * interval '1 minute',
                              timestamp '2026-04-01' + g * interval '1 minute'
                          FROM generate_series(550, 649) g""")
    grown = planner.tick()
    [added] = grown.dynamic_partitions_requests
    assert isinstance(added, dg.AddDynamicPartitionsRequest) and list(added.partition_keys) == ["id_600-699"]
    assert requested(grown) == [old_keys[-1], "id_600-699"]  # the filled-up last window keeps its padded key
    planner.run(grown)
    _, table = published(target)
    assert id_amounts(table) == source_rows(orders_pg)
    assert instance.get_dynamic_partitions(PARTITIONS) == [*old_keys, "id_600-699"]
    assert instance.get_materialized_partitions(chunk_key) == {*old_keys, "id_600-699"}
    assert_quiet(planner.tick())
