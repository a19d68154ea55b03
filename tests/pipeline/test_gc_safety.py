"""Deletion is the most dangerous code we have: what `rivet gc` and retention must never move
(issue 33, findings 2, 3 and 7 and the smaller gc items).

rivet_core/manifest/retention.py and rivet_core/pipeline/retention/gc.py are the code; ADR-0007 the
contract. Against real PostgreSQL and the local disk or the S3 server. The oracle never trusts
the tool: it lists and reads the prefix itself (pathlib / boto3 bytes), reads tables with
delta-rs and pyiceberg and folders with pyarrow's dataset reader, and compares with the source
queried directly. The grace period is crossed with `--grace-hours 0`, never a sleep.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable
from hypothesis import given
from hypothesis import strategies as st

from rivet_core import api
from rivet_core.errors import ConfigError
from rivet_core.manifest import run_manifest_key
from rivet_core.manifest.artifacts import success_marker_body
from rivet_core.manifest.model import manifest_from_dict, serialize_manifest
from rivet_core.manifest.retention import GC_PREFIX, PrefixSnapshot, RetentionPolicy, plan_gc
from rivet_core.pipeline.retention.gc import run_gc
from tests.helpers import db_exec, rivet_in_process, source_block, state_rows, write_config
from tests.pipeline.test_retention import prefixes


# ------------------------------------------------------------------------------ helpers
def files(root: Path) -> dict[str, bytes]:
    """Every file under a local folder → its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def s3_objects(s3: Any, prefix: str) -> dict[str, bytes]:
    client, out = s3.client(), {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
        for obj in page.get("Contents", []) or []:
            out[obj["Key"][len(prefix):]] = client.get_object(Bucket=s3.bucket, Key=obj["Key"])["Body"].read()
    return out


def create_items(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), amount NUMERIC(12,2), "
                 "updated_at TIMESTAMPTZ NOT NULL)")


def insert_items(url: str, ids: range) -> None:
    rows = ", ".join(f"({i}, 'n{i}', {i}.25, TIMESTAMPTZ '2026-03-01 00:00:00+00' + INTERVAL '{i} minutes')"
                     for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, amount, updated_at) VALUES {rows}")


def source_items(url: str) -> dict[int, tuple[str, Decimal]]:
    return {int(i): (n, a) for i, n, a in db_exec(url, "SELECT id, name, amount FROM items")}


def rows_of(table: Any) -> dict[int, tuple[str, Decimal]]:
    """id → (name, amount) of a pyarrow table; a row read twice fails."""
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), f"a row appears twice: {sorted(ids)}"
    return {int(i): (n, Decimal(str(a)).quantize(Decimal("0.01")))
            for i, n, a in zip(ids, table.column("name").to_pylist(), table.column("amount").to_pylist(),
                               strict=True)}


def run_ok(config: Path, export: str = "items") -> api.RunSummary:
    summary = api.run_export(api.load_config(str(config)), export)
    assert summary.status == "success", summary.error_message
    return summary


# ====================================== finding 2: gc flags never touch a Delta or Iceberg table
@pytest.fixture(params=["delta-local", "delta-s3", "iceberg-local"])
def table_place(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    fmt, kind = request.param.split("-")
    place: dict[str, Any] = {"format": fmt, "kind": kind, "tmp": tmp_path}
    if kind == "local":
        place["dest"] = {"type": "local", "path": str(tmp_path / "out")}
        place["snapshot"] = lambda: files(tmp_path / "out")
        place["uri"], place["options"] = str(tmp_path / "out"), {}
    else:
        s3 = request.getfixturevalue("s3")
        place["dest"] = {"type": "s3", "bucket": s3.bucket, "prefix": "exports/items/", "endpoint": s3.endpoint,
                         "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
        place["snapshot"] = lambda: s3_objects(s3, "exports/items/")
        place["uri"] = f"s3://{s3.bucket}/exports/items"
        place["options"] = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.access_key,
                            "AWS_SECRET_ACCESS_KEY": s3.secret_key, "AWS_REGION": "us-east-1",
                            "AWS_ALLOW_HTTP": "true"}
    return place


def read_table_rows(place: dict[str, Any]) -> dict[int, tuple[str, Decimal]]:
    if place["format"] == "delta":
        return rows_of(DeltaTable(place["uri"], storage_options=place["options"]).to_pyarrow_table())
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("rivet", uri=f"sqlite:///{place['tmp'] / 'catalog.db'}")
    try:
        return rows_of(catalog.load_table("lake.items").scan().to_arrow())
    finally:
        catalog.engine.dispose()


def test_gc_flags_on_a_delta_or_iceberg_table_are_refused_and_every_row_stays_readable(
        table_place: dict[str, Any], pg_url: str) -> None:
    create_items(pg_url)
    export = {"name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
              "format": "parquet", "table_format": table_place["format"], "destination": table_place["dest"]}
    if table_place["format"] == "iceberg":
        export["iceberg"] = {"catalog_url": f"sqlite:///{table_place['tmp'] / 'catalog.db'}", "namespace": "lake"}
    config = write_config(table_place["tmp"], source_block(pg_url), [export])
    for lo in (1, 11, 21):
        insert_items(pg_url, range(lo, lo + 10))
        run_ok(config)
    before = table_place["snapshot"]()
    assert read_table_rows(table_place) == source_items(pg_url) and len(source_items(pg_url)) == 30

    for _ in range(2):  # the reproduction: two gc calls, grace 0
        refused = rivet_in_process("gc", "-c", str(config), "items", "--keep-runs", "1", "--grace-hours", "0")
        assert refused.exit_code == 1, refused.output
        assert "export 'items'" in refused.output and f"table_format: {table_place['format']}" in refused.output
        assert "vacuum" in refused.output
    # Without the export named it is skipped with the reason, never cleaned.
    unnamed = rivet_in_process("gc", "-c", str(config), "--keep-runs", "1", "--grace-hours", "0")
    assert "items: skipped" in unnamed.output and unnamed.exit_code == 1, unnamed.output
    cfg = api.load_config(str(config))
    with pytest.raises(ConfigError, match="vacuum"):  # the API takes the same policy
        run_gc(cfg, cfg.export("items"), RetentionPolicy(keep_runs=1, grace_hours=0))
    assert table_place["snapshot"]() == before  # nothing moved or deleted
    assert read_table_rows(table_place) == source_items(pg_url)

    # The same prefix under a config that forgot `table_format:`: the prefix itself says it
    # holds a table (the manifest's table commit, `_delta_log/` or `metadata/`): refused, exit 3.
    plain = {k: v for k, v in export.items() if k not in ("table_format", "iceberg")}
    plain_config = write_config(table_place["tmp"], source_block(pg_url), [plain])
    refused = rivet_in_process("gc", "-c", str(plain_config), "items", "--keep-runs", "1", "--grace-hours", "0")
    assert refused.exit_code == 3 and "REFUSED" in refused.output and "table" in refused.output, refused.output
    assert table_place["snapshot"]() == before
    assert read_table_rows(table_place) == source_items(pg_url)


# ================================= finding 3: another config's export nested under data/
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_retention_never_sweeps_another_configs_export_nested_under_data_and_names_it(
        tmp_path: Path, pg_url: str, kind: str, request: pytest.FixtureRequest) -> None:
    create_items(pg_url)
    insert_items(pg_url, range(1, 21))
    if kind == "local":
        outer = {"type": "local", "path": str(tmp_path / "out")}
        inner = {"type": "local", "path": str(tmp_path / "out" / "data" / "eb")}

        def listing(sub: str) -> dict[str, bytes]:
            return files(tmp_path / "out" / sub) if (tmp_path / "out" / sub).exists() else {}
    else:
        s3 = request.getfixturevalue("s3")
        base = {"type": "s3", "bucket": s3.bucket, "endpoint": s3.endpoint, "region": "us-east-1",
                "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
        outer, inner = {**base, "prefix": "exports/out/"}, {**base, "prefix": "exports/out/data/eb/"}

        def listing(sub: str) -> dict[str, bytes]:
            return s3_objects(s3, f"exports/out/{sub}")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config_a = write_config(tmp_path / "a", source_block(pg_url), [{
        "name": "items", "table": "items", "format": "parquet", "destination": outer,
        "retention": {"keep_runs": 1, "grace_hours": 0}}])
    config_b = write_config(tmp_path / "b", source_block(pg_url), [{
        "name": "eb", "table": "items", "format": "parquet", "destination": inner}])
    run_ok(config_a)
    run_ok(config_b, "eb")
    b_files = listing("data/eb/")
    assert {"manifest.json", "_SUCCESS"} <= set(b_files)

    for _ in range(2):  # a run parks, the next deletes (grace 0): neither may touch B
        summary = run_ok(config_a)
        warning = " ".join(summary.warnings)
        assert "retention refused" in warning and "data/eb/" in warning and "destination" in warning, warning
        assert listing("data/eb/") == b_files
    gc = rivet_in_process("gc", "-c", str(config_a), "items", "--grace-hours", "0")
    assert gc.exit_code == 3 and "data/eb/" in gc.output and "data/eb/manifest.json" in gc.output, gc.output
    assert listing("data/eb/") == b_files
    assert not listing("_quarantine/")  # nothing of A's moved either: refused, whole
    [journal] = [json.loads(r[0]) for r in state_rows(
        config_a, "SELECT journal_json FROM run_journal WHERE run_id LIKE ?", ["items_gc_%"])]
    planned = [e["event"]["GcPlanned"] for e in journal["entries"] if "GcPlanned" in e["event"]]
    assert len(planned) == 1 and "data/eb/" in planned[0]["refused"] and planned[0]["steps"] == 0
    assert not [e for e in journal["entries"] if "GcStep" in e["event"]]

    validated = rivet_in_process("validate", "-c", str(config_b), "--depth", "full")
    assert validated.exit_code == 0 and "eb: PASSED" in validated.output, validated.output
    import io

    import pyarrow.parquet as pq

    parts = [p["path"] for p in json.loads(b_files["manifest.json"])["parts"]]
    assert rows_of(pa.concat_tables(pq.read_table(io.BytesIO(b_files[p])) for p in parts)) == source_items(pg_url)


def test_a_foreign_trail_already_parked_is_never_deleted_and_the_plan_names_it() -> None:
    """An earlier gc (before this rule) parked another export's trail: the next gc past the
    grace period must not delete it."""
    from tests.pipeline.test_retention import _manifest

    current = _manifest("orders_01", 60, "success", ["data/p1.parquet"], baseline=True)
    old = _manifest("orders_00", 0, "success", ["data/p0.parquet"], baseline=True)
    stamp = f"{GC_PREFIX}20260101T000000Z-aaaaaa/"
    keys = ["manifest.json", "_SUCCESS", "manifest-orders_01.json", "manifest-orders_00.json", "data/p1.parquet",
            "data/p0.parquet", f"{stamp}data/eb/manifest.json", f"{stamp}data/eb/data/eb_1.parquet",
            f"{stamp}data/old.parquet"]
    snapshot = PrefixSnapshot(current=current, copies={"manifest-orders_01.json": current,
                                                       "manifest-orders_00.json": old}, parked={}, keys=keys)
    plan = plan_gc(snapshot, RetentionPolicy(keep_runs=1, grace_hours=0), datetime(2026, 2, 1).astimezone(),
                   uri="file:///x/", accumulates=False, sweep_orphans=True)
    assert not plan.steps
    assert plan.refused is not None and f"{stamp}data/eb/" in plan.refused
    # Beside data/ (a time partition, another export next to it) gc moves nothing: no refusal.
    snapshot.keys = [k for k in keys if "/eb/" not in k] + ["ts=2026-01-01/manifest.json", "other/_SUCCESS"]
    plan = plan_gc(snapshot, RetentionPolicy(keep_runs=1, grace_hours=0), datetime(2026, 2, 1).astimezone(),
                   uri="file:///x/", accumulates=False, sweep_orphans=True)
    assert plan.refused is None and "ts=2026-01-01/manifest.json" not in {s.key for s in plan.steps}
    # A Delta table's log under data/ is a trail too.
    snapshot.keys = [k for k in keys if "/eb/" not in k] + ["data/t/_delta_log/00000000000000000000.json"]
    plan = plan_gc(snapshot, RetentionPolicy(keep_runs=1, grace_hours=0), datetime(2026, 2, 1).astimezone(),
                   uri="file:///x/", accumulates=False, sweep_orphans=True)
    assert not plan.steps and plan.refused is not None and "data/t/" in plan.refused


PARKED = f"{GC_PREFIX}20250101T000000Z-aaaaaa/"
#: (a trail key, the folder the refusal must name)
TRAILS = [("data/eb/manifest.json", "data/eb/"), ("data/eb/_SUCCESS", "data/eb/"),
          ("data/x/y/manifest-r1.json", "data/x/y/"), ("data/t/_delta_log/00000000000000000000.json", "data/t/"),
          ("data/i/metadata/00000-abc.metadata.json", "data/i/"),
          (f"{PARKED}data/eb/manifest.json", f"{PARKED}data/eb/")]


@given(prefixes(), st.sampled_from(TRAILS), st.integers(0, 48))
def test_any_foreign_trail_where_gc_acts_means_no_step_at_all(
        case: tuple[PrefixSnapshot, RetentionPolicy, bool, datetime], trail: tuple[str, str], hours: int) -> None:
    """Whatever the history and the policy, a foreign trail under data/ (or parked) leaves the
    plan without a single move or delete, and the refusal names the trail's folder."""
    snapshot, policy, accumulates, now = case
    key, folder = trail
    snapshot.keys = sorted({*snapshot.keys, key, folder + "part.parquet"})
    plan = plan_gc(snapshot, policy, now + timedelta(hours=hours), uri="file:///x/", accumulates=accumulates,
                   sweep_orphans=True)
    assert plan.steps == [] and plan.refused is not None and folder in plan.refused


# ========================================= finding 7: a slow clock must not hide a full refresh
def _set_finished_at(root: Path, when: datetime) -> None:
    """Rewrite the current manifest (and its copy and `_SUCCESS`) as a host whose clock was
    behind would have written it."""
    manifest = manifest_from_dict(json.loads((root / "manifest.json").read_text()))
    import dataclasses

    data = serialize_manifest(dataclasses.replace(manifest, finished_at=when.isoformat(),
                                                  started_at=(when - timedelta(seconds=5)).isoformat()))
    for key in ("manifest.json", run_manifest_key(manifest.run_id)):
        (root / key).write_bytes(data)
    (root / "_SUCCESS").write_bytes(success_marker_body(data))


@pytest.mark.parametrize("rule", [("--keep-runs", "10"), ("--keep-days", "0.5")])
def test_a_full_refresh_whose_clock_was_behind_stays_the_readable_baseline_after_gc(
        tmp_path: Path, pg_url: str, rule: tuple[str, str]) -> None:
    create_items(pg_url)
    insert_items(pg_url, range(1, 41))
    root = tmp_path / "out"
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {"type": "local", "path": str(root)}}])
    first = run_ok(config)
    insert_items(pg_url, range(41, 51))
    run_ok(config)
    db_exec(pg_url, "DELETE FROM items WHERE id % 10 = 3", "UPDATE items SET name = 'renamed' WHERE id % 10 = 5")
    refresh = rivet_in_process("run", "-c", str(config), "-e", "items", "--full-refresh")
    assert refresh.exit_code == 0, refresh.output
    # The refresh ran on a host whose clock was a day behind: it "finished" before the first run.
    skewed = datetime.fromisoformat(json.loads((root / run_manifest_key(first.run_id)).read_text())["finished_at"])
    _set_finished_at(root, skewed - timedelta(days=1))
    insert_items(pg_url, range(51, 61))
    run_ok(config)
    assert [json.loads(p.read_text()).get("sequence") for p in sorted(root.glob("manifest-*.json"),
            key=lambda p: json.loads(p.read_text())["sequence"])] == [1, 2, 3, 4]

    # Before any gc, what the API and Dagster's IO manager read is the refresh and what followed.
    from rivet_dagster.io_manager import read_export

    cfg = api.load_config(str(config))
    table = read_export(cfg, cfg.export("items"))
    assert table is not None and rows_of(table) == source_items(pg_url)

    done = rivet_in_process("gc", "-c", str(config), "items", *rule, "--grace-hours", "0")
    assert done.exit_code == 0, done.output
    assert rows_of(ds.dataset(str(root / "data"), format="parquet").to_table()) == source_items(pg_url)
    assert rivet_in_process("validate", "-c", str(config), "--depth", "full").exit_code == 0


def test_a_run_without_a_sequence_written_after_the_ledger_started_is_spared_not_moved() -> None:
    """Manifests written before `sequence` existed sort first; one that finished after the
    first sequenced run (an older version wrote it after the upgrade) cannot be placed, so
    gc protects it instead of trusting either order."""
    import dataclasses

    from tests.pipeline.test_retention import _manifest

    def run(name: str, minute: int, sequence: int | None, baseline: bool = False) -> Any:
        manifest = _manifest(name, minute, "success", [f"data/{name}.parquet"], baseline=baseline)
        return dataclasses.replace(manifest, sequence=sequence)

    legacy = run("orders_00", 0, None, baseline=True)
    first, second = run("orders_01", 60, 1), run("orders_02", 120, 2)
    downgraded = run("orders_03", 180, None, baseline=True)
    current = run("orders_04", 240, 3)
    history = [legacy, first, second, downgraded, current]
    snapshot = PrefixSnapshot(current=current, copies={run_manifest_key(m.run_id): m for m in history}, parked={},
                              keys=sorted({"manifest.json", "_SUCCESS"} | {run_manifest_key(m.run_id) for m in history}
                                          | {p.path for m in history for p in m.parts}))
    plan = plan_gc(snapshot, RetentionPolicy(keep_runs=1), datetime(2026, 1, 2).astimezone(), uri="file:///x/",
                   accumulates=True, sweep_orphans=True)
    moved = {s.key for s in plan.steps}
    assert "orders_03" in plan.protected and "data/orders_03.parquet" not in moved
    assert run_manifest_key("orders_03") not in moved and any("orders_03" in n for n in plan.notes)
    # the legacy run that finished before the ledger started is placed (first) and parked
    assert {"data/orders_00.parquet", run_manifest_key("orders_00")} <= moved


# ================================================ smaller: partition_by buckets, bounded flags
def test_gc_cleans_every_bucket_of_a_partition_by_export(tmp_path: Path, pg_url: str) -> None:
    """An incremental `partition_by` export: each bucket keeps its last delivering run
    (`--keep-runs 1`), so the bucket that got new rows drops its first run's rows and the
    others keep theirs — gc reaches every `<col>=<label>/` prefix, not the literal
    `{partition}` path."""
    db_exec(pg_url, "CREATE TABLE ev (id int PRIMARY KEY, day date, v text, ts timestamp NOT NULL)",
            "INSERT INTO ev SELECT g, DATE '2024-03-01' + (g % 3), 'v' || g, TIMESTAMP '2026-01-01' + g * "
            "INTERVAL '1 minute' FROM generate_series(1, 30) g",
            "INSERT INTO ev VALUES (31, NULL, 'null day', TIMESTAMP '2026-01-01')")
    root = tmp_path / "out" / "ev"
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "ev", "table": "ev", "format": "parquet", "partition_by": "day", "mode": "incremental",
        "cursor_column": "ts", "destination": {"type": "local", "path": "out/ev/{partition}"}}])
    first = rivet_in_process("run", "-c", str(config), "-e", "ev")
    assert first.exit_code == 0, first.output
    db_exec(pg_url, "INSERT INTO ev SELECT g, DATE '2024-03-01', 'new' || g, TIMESTAMP '2026-02-01' + g * "
                    "INTERVAL '1 minute' FROM generate_series(41, 45) g")
    second = rivet_in_process("run", "-c", str(config), "-e", "ev")
    assert second.exit_code == 0, second.output
    buckets = sorted(p.parent.name for p in root.glob("*/manifest.json"))
    assert len(buckets) == 4, buckets  # three days and the NULL bucket
    before = {b: files(root / b) for b in buckets}

    done = rivet_in_process("gc", "-c", str(config), "ev", "--keep-runs", "1")
    assert done.exit_code == 0, done.output
    assert len(list((root / "day=2024-03-01").glob(f"{GC_PREFIX}*/data/*"))) == 1  # run 1's part there
    for bucket in buckets:  # the current manifest's files, byte for byte
        manifest = json.loads(before[bucket]["manifest.json"])
        for key in [p["path"] for p in manifest["parts"]] + ["manifest.json", "_SUCCESS"]:
            assert (root / bucket / key).read_bytes() == before[bucket][key]
    # what a reader of the buckets' data/ folders sees (the parts carry the `day` column)
    table = pa.concat_tables(ds.dataset(str(root / b / "data"), format="parquet").to_table(columns=["id", "v"])
                             for b in buckets)
    got = {int(i): v for i, v in zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True)}
    assert len(got) == table.num_rows
    expected = db_exec(pg_url, "SELECT id, v FROM ev WHERE day IS DISTINCT FROM DATE '2024-03-01' OR id > 40")
    assert got == {int(i): v for i, v in expected}
    assert rivet_in_process("validate", "-c", str(config), "-e", "ev").exit_code == 0


@pytest.mark.parametrize(("flag", "value"), [("--keep-days", "1e9"), ("--grace-hours", "1e308"),
                                             ("--keep-days", "nan"), ("--grace-hours", "inf"),
                                             ("--keep-runs", "0"), ("--keep-runs", "10000001"),
                                             ("--keep-days", "0"), ("--grace-hours", "-1")])
def test_a_gc_flag_out_of_bounds_is_a_usage_error_naming_the_flag_and_its_range(
        tmp_path: Path, flag: str, value: str) -> None:
    config = write_config(tmp_path, source_block("postgresql://rivet@127.0.0.1:1/none"), [{
        "name": "items", "table": "items", "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    rules = [] if flag in ("--keep-runs", "--keep-days") else ["--keep-runs", "1"]
    result = rivet_in_process("gc", "-c", str(config), "items", *rules, flag, value)
    assert result.exit_code == 1, result.output
    assert f"{flag} " in result.output and "out of range" in result.output and "<=" in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
