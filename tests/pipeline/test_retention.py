"""The readable `data/` layout and retention (`rivet gc`, `retention:`), issue 15 item 8.

docs/adr/0007-readable-layout-and-retention.md is the contract. Against real PostgreSQL and,
where the destination matters, both a local folder and the real S3 server. The oracle never
trusts the tool: it lists and downloads the prefix itself (pathlib / boto3), reads `data/`
with pyarrow's dataset reader (and pandas and DuckDB on a local folder), and compares with
the source table queried directly. The grace period is crossed with an injected clock
(`run_gc(now=…)`) or `grace_hours: 0` — never a sleep.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core import api
from rivet_core.manifest import run_manifest_key
from rivet_core.manifest.artifacts import success_marker_body
from rivet_core.manifest.model import (
    Manifest,
    ManifestDestination,
    ManifestExtraction,
    ManifestPart,
    ManifestSource,
)
from rivet_core.manifest.retention import (
    GC_PREFIX,
    PrefixSnapshot,
    RetentionPolicy,
    RunRef,
    kept_runs,
    live_runs,
    plan_gc,
)
from rivet_core.pipeline.facade.chunk_commit import is_own_part
from rivet_core.pipeline.retention.gc import policy_for, run_gc
from tests.helpers import db_exec, rivet_in_process, source_block, state_rows, write_config

EXPORT = "orders"


# ------------------------------------------------------------------------------ the source
def create_orders(url: str, rows: int = 300) -> None:
    db_exec(url, """CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL,
                                          amount numeric(12,2) NOT NULL, updated_at timestamp NOT NULL)""",
            f"""INSERT INTO orders SELECT g, 'c' || (g % 13), round((g * 7.31) % 5000, 2),
                       timestamp '2026-03-01' + g * interval '1 minute' FROM generate_series(1, {rows}) g""")


def source_rows(url: str, where: str = "TRUE") -> dict[int, tuple[str, Decimal]]:
    return {int(i): (c, a) for i, c, a in db_exec(url, f"SELECT id, customer, amount FROM orders WHERE {where}")}


def table_rows(table: pa.Table) -> dict[int, tuple[str, Decimal]]:
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a row appears twice in the dataset"
    return {int(i): (c, Decimal(str(a)).quantize(Decimal("0.01")))
            for i, c, a in zip(ids, table.column("customer").to_pylist(), table.column("amount").to_pylist(),
                               strict=True)}


# ------------------------------------------------------------------------------ the prefix
@dataclass
class Place:
    """An export's prefix on a local folder or on S3, read by the test itself."""

    kind: str
    tmp: Path
    s3: Any = None

    def destination(self) -> dict[str, Any]:
        if self.kind == "local":
            return {"type": "local", "path": f"out/{EXPORT}"}
        return {"type": "s3", "bucket": self.s3.bucket, "prefix": f"exports/{EXPORT}/", "endpoint": self.s3.endpoint,
                "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}

    @property
    def root(self) -> Path:
        return self.tmp / "out" / EXPORT

    def objects(self) -> dict[str, bytes]:
        """Every object under the prefix → its bytes."""
        if self.kind == "local":
            return {p.relative_to(self.root).as_posix(): p.read_bytes()
                    for p in sorted(self.root.rglob("*")) if p.is_file()}
        client, out = self.s3.client(), {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket,
                                                                    Prefix=f"exports/{EXPORT}/"):
            for obj in page.get("Contents", []) or []:
                key = obj["Key"][len(f"exports/{EXPORT}/"):]
                out[key] = client.get_object(Bucket=self.s3.bucket, Key=obj["Key"])["Body"].read()
        return out

    def manifest(self, key: str = "manifest.json") -> dict[str, Any]:
        return json.loads(self.objects()[key])

    def dataset(self) -> pa.Table:
        """`pyarrow.dataset(<prefix>/data)` — what a user points their tools at."""
        if self.kind == "local":
            return ds.dataset(str(self.root / "data"), format="parquet").to_table()
        from pyarrow import fs

        endpoint = urllib.parse.urlsplit(self.s3.endpoint)
        s3fs = fs.S3FileSystem(access_key=self.s3.access_key, secret_key=self.s3.secret_key,
                               endpoint_override=endpoint.netloc, scheme=endpoint.scheme, region="us-east-1")
        return ds.dataset(f"{self.s3.bucket}/exports/{EXPORT}/data", format="parquet", filesystem=s3fs).to_table()


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "local":
        return Place("local", tmp_path)
    return Place("s3", tmp_path, request.getfixturevalue("s3"))


def config_for(place: Place, url: str, **export: Any) -> Path:
    block = {"name": EXPORT, "table": "orders", "mode": "full", "format": "parquet",
             "destination": place.destination(), **export}
    return write_config(place.tmp, source_block(url), [block])


def run(config: Path) -> api.RunSummary:
    summary = api.run_export(api.load_config(str(config)), EXPORT)
    assert summary.status == "success", summary.error_message
    return summary


def gc_cli(config: Path, *args: str) -> Any:
    return rivet_in_process("gc", "-c", str(config), EXPORT, *args)


def gc_journals(config: Path) -> list[dict[str, Any]]:
    rows = state_rows(config, "SELECT journal_json FROM run_journal WHERE run_id LIKE ? ORDER BY finished_at",
                      [f"{EXPORT}_gc_%"])
    return [json.loads(r[0]) for r in rows]


def events(journal: dict[str, Any], variant: str) -> list[dict[str, Any]]:
    return [e["event"][variant] for e in journal["entries"] if variant in e["event"]]


def current_files(place: Place) -> dict[str, bytes]:
    """The current manifest's parts, `manifest.json`, its run copy and `_SUCCESS`, byte for byte."""
    objects = place.objects()
    manifest = json.loads(objects["manifest.json"])
    keys = [p["path"] for p in manifest["parts"]] + ["manifest.json", "_SUCCESS",
                                                      run_manifest_key(manifest["run_id"])]
    return {k: objects[k] for k in keys}


# =============================================== 1. full export × 3, gc keep_runs 1, local and S3
def test_three_full_runs_then_gc_keeps_one_readable_snapshot_equal_to_the_source(
        place: Place, pg_url: str) -> None:
    create_orders(pg_url)
    config = config_for(place, pg_url)
    runs = []
    for change in ("UPDATE orders SET amount = amount + 1 WHERE id % 5 = 0",
                   "INSERT INTO orders SELECT g, 'new', 1.25, now() FROM generate_series(301, 340) g",
                   "DELETE FROM orders WHERE id % 7 = 0"):
        runs.append(run(config))
        db_exec(pg_url, change)
    runs.append(run(config))
    source = source_rows(pg_url)

    # Before gc: every run's parts are in data/ (four snapshots), manifests outside it.
    before = place.objects()
    assert sorted(k for k in before if not k.startswith("data/")) == sorted(
        ["manifest.json", "_SUCCESS"] + [run_manifest_key(s.run_id) for s in runs])
    assert sorted(k for k in before if k.startswith("data/")) == sorted(p.path for s in runs for p in s.manifest_parts)
    assert all(p.path.startswith("data/") for s in runs for p in s.manifest_parts)
    current = current_files(place)

    # --dry-run: prints the plan, changes nothing (destination and journal).
    dry = gc_cli(config, "--keep-runs", "1", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.output.count("would quarantine") == 6  # 3 superseded copies + 3 superseded parts
    assert place.objects() == before and gc_journals(config) == []

    # gc: the superseded copies and parts leave the prefix root and data/ for _quarantine/gc/.
    done = gc_cli(config, "--keep-runs", "1")
    assert done.exit_code == 0, done.output
    after = place.objects()
    assert current_files(place) == current  # never touched
    assert sorted(k for k in after if k.startswith("data/")) == sorted(p.path for p in runs[-1].manifest_parts)
    parked = {k: v for k, v in after.items() if k.startswith(GC_PREFIX)}
    [stamp] = {k[len(GC_PREFIX):].split("/", 1)[0] for k in parked}
    for old in runs[:-1]:
        for part in old.manifest_parts:  # moved with its key kept, byte for byte
            assert parked[f"{GC_PREFIX}{stamp}/{part.path}"] == before[part.path]
        assert f"{GC_PREFIX}{stamp}/{run_manifest_key(old.run_id)}" in parked
    assert sorted(k for k in after if not k.startswith((GC_PREFIX, "data/"))) == sorted(
        ["manifest.json", "_SUCCESS", run_manifest_key(runs[-1].run_id)])

    # The readable folder is the source table, exactly.
    assert table_rows(place.dataset()) == source
    if place.kind == "local":
        import duckdb
        import pandas as pd

        frame = pd.read_parquet(place.root / "data")
        assert table_rows(pa.Table.from_pandas(frame, preserve_index=False)) == source
        rows = duckdb.sql(f"SELECT id, customer, amount FROM read_parquet('{place.root}/data/*.parquet')").fetchall()
        assert {int(i): (c, a) for i, c, a in rows} == source and len(rows) == len(source)

    # Before the grace period nothing is deleted; after it, the parked objects are gone.
    config_obj = api.load_config(str(config))
    policy = RetentionPolicy(keep_runs=1, grace_hours=24)
    [early] = run_gc(config_obj, config_obj.export(EXPORT), policy, now=datetime.now(UTC) + timedelta(hours=23))
    assert early.plan is not None and early.plan.count("delete") == 0
    assert place.objects() == after
    [late] = run_gc(config_obj, config_obj.export(EXPORT), policy, now=datetime.now(UTC) + timedelta(hours=25))
    assert late.plan is not None and late.plan.count("delete") == len(parked) and not late.failed
    final = place.objects()
    assert not [k for k in final if k.startswith("_quarantine/")]
    assert current_files(place) == current
    assert table_rows(place.dataset()) == source
    validated = rivet_in_process("validate", "-c", str(config), "--depth", "full", "--format", "json")
    assert validated.exit_code == 0, validated.output
    assert not json.loads(validated.output)["exports"][0]["verification"]["failures"]

    # Every step is journaled: one GcStep per move or delete, in order, all ok.
    journals = gc_journals(config)
    assert len(journals) == 3
    steps = [e for j in journals for e in events(j, "GcStep")]
    assert [s["action"] for s in steps] == ["park_copy"] * 3 + ["park_file"] * 3 + ["delete"] * len(parked)
    assert all(s["ok"] for s in steps)
    assert {s["key"] for s in steps if s["action"] == "delete"} == set(parked)
    assert all(len(events(j, "GcPlanned")) == 1 and len(events(j, "GcCompleted")) == 1 for j in journals)


# ================================================ 2. a retention block runs after every publish
def test_a_retention_block_tidies_after_each_successful_run_and_journals_in_the_run(
        place: Place, pg_url: str) -> None:
    create_orders(pg_url, rows=50)
    config = config_for(place, pg_url, retention={"keep_runs": 1, "grace_hours": 0})
    first = run(config)
    assert not [e for e in first.journal.entries if "GcStep" in e["event"]]  # nothing superseded yet
    db_exec(pg_url, "UPDATE orders SET amount = amount + 2")
    second = run(config)
    parked = [e["event"]["GcStep"] for e in second.journal.entries if "GcStep" in e["event"]]
    assert [s["action"] for s in parked] == ["park_copy", "park_file"] and all(s["ok"] for s in parked)
    assert parked[1]["key"] == first.manifest_parts[0].path
    objects = place.objects()
    assert sorted(k for k in objects if k.startswith("data/")) == [second.manifest_parts[0].path]
    assert table_rows(place.dataset()) == source_rows(pg_url)
    # The retention entries sit after validation/manifest and before the terminal RunCompleted.
    variants = [next(iter(e["event"])) for e in second.journal.entries]
    assert variants[-1] == "RunCompleted" and variants.index("GcPlanned") < variants.index("GcCompleted")

    third = run(config)  # grace 0: what the second run parked is deleted by the third
    deleted = [e["event"]["GcStep"]["key"] for e in third.journal.entries
               if "GcStep" in e["event"] and e["event"]["GcStep"]["action"] == "delete"]
    assert sorted(deleted) == sorted(k for k in objects if k.startswith(GC_PREFIX))
    final = place.objects()
    assert not [k for k in final if k in deleted]
    assert sorted(k for k in final if k.startswith("data/")) == [third.manifest_parts[0].path]
    assert table_rows(place.dataset()) == source_rows(pg_url)
    stored = state_rows(config, "SELECT journal_json FROM run_journal WHERE run_id = ?", [third.run_id])
    assert sum("GcStep" in e["event"] for e in json.loads(stored[0][0])["entries"]) == len(deleted) + 2


# ================================================ 3. incremental: the union of the kept runs
def test_an_incremental_export_keeps_exactly_the_union_of_the_kept_runs(place: Place, pg_url: str) -> None:
    create_orders(pg_url, rows=100)
    config = config_for(place, pg_url, mode="incremental", cursor_column="updated_at")
    delivered = [run(config)]
    for lo in (101, 151):
        db_exec(pg_url, f"INSERT INTO orders SELECT g, 'c' || g, g * 1.5, timestamp '2026-03-02' + g * interval "
                        f"'1 minute' FROM generate_series({lo}, {lo + 49}) g")
        delivered.append(run(config))
    empty = run(config)  # found nothing new: an empty manifest, which keep_runs does not count
    assert not empty.manifest_parts and all(s.manifest_parts for s in delivered)

    done = gc_cli(config, "--keep-runs", "2")
    assert done.exit_code == 0, done.output
    kept = {delivered[1].run_id, delivered[2].run_id, empty.run_id}
    objects = place.objects()
    assert sorted(k for k in objects if k.startswith("data/")) == sorted(
        p.path for s in delivered[1:] for p in s.manifest_parts)
    assert sorted(k for k in objects if k.startswith("manifest-")) == sorted(run_manifest_key(r) for r in kept)
    for key in [run_manifest_key(delivered[0].run_id)] + [p.path for p in delivered[0].manifest_parts]:
        assert [k for k in objects if k.startswith(GC_PREFIX) and k.endswith("/" + key)], key  # parked
    expected = source_rows(pg_url, "id > 100")  # the rows the two kept delivering runs exported
    assert table_rows(place.dataset()) == expected
    # What Dagster's IO manager and the API read is the same union.
    cfg = api.load_config(str(config))
    assert {m.run_id for m in api.dataset_manifests(cfg, cfg.export(EXPORT))} == kept
    from rivet_dagster.io_manager import read_export

    table = read_export(cfg, cfg.export(EXPORT))
    assert table is not None and table_rows(table) == expected
    # The next run continues from the cursor; its rows join the dataset.
    db_exec(pg_url, "INSERT INTO orders VALUES (201, 'late', 9.99, timestamp '2026-03-05')")
    run(config)
    assert table_rows(place.dataset()) == source_rows(pg_url, "id > 100")


# ================================================ 4. a prefix in the flat layout of earlier versions
def _flatten(root: Path) -> None:
    """Rewrite a local prefix the way versions before `data/` wrote it: parts at the root,
    manifest paths without `data/`, `_SUCCESS` over the rewritten bytes."""
    manifest = json.loads((root / "manifest.json").read_text())
    for part in manifest["parts"]:
        name = part["path"].split("/", 1)[1]
        (root / part["path"]).rename(root / name)
        part["path"] = name
    (root / "data").rmdir()
    data = (json.dumps(manifest, indent=2) + "\n").encode()
    for key in ("manifest.json", run_manifest_key(manifest["run_id"])):
        (root / key).write_bytes(data)
    (root / "_SUCCESS").write_bytes(success_marker_body(data))


@pytest.mark.parametrize("mode", ["full", "incremental"])
def test_an_old_flat_prefix_still_validates_keeps_working_and_migrates_to_data(
        tmp_path: Path, pg_url: str, mode: str) -> None:
    create_orders(pg_url, rows=80)
    place = Place("local", tmp_path)
    config = config_for(place, pg_url, mode=mode, **({"cursor_column": "updated_at"} if mode == "incremental" else {}))
    old = run(config)
    _flatten(place.root)
    old_part = old.manifest_parts[0].path.split("/", 1)[1]
    assert (place.root / old_part).is_file() and not (place.root / "data").exists()
    validated = rivet_in_process("validate", "-c", str(config), "--depth", "full")
    assert validated.exit_code == 0 and "PASSED" in validated.output, validated.output

    db_exec(pg_url, "INSERT INTO orders VALUES (81, 'new', 3.50, timestamp '2026-03-09')")
    new = run(config)  # new parts go to data/; an incremental run continues from its cursor
    assert all(p.path.startswith("data/") for p in new.manifest_parts)
    cfg = api.load_config(str(config))
    if mode == "incremental":
        assert new.total_rows == 1
        from rivet_dagster.io_manager import read_export

        table = read_export(cfg, cfg.export(EXPORT))  # the flat run and the new one, together
        assert table is not None and table_rows(table) == source_rows(pg_url)
    assert rivet_in_process("validate", "-c", str(config), "--depth", "full").exit_code == 0

    done = gc_cli(config, "--keep-runs", "1")
    assert done.exit_code == 0, done.output
    assert not (place.root / old_part).exists()  # the superseded flat part left the root …
    assert list(place.root.glob(f"{GC_PREFIX}*/{old_part}"))  # … for quarantine
    assert sorted(p.name for p in place.root.iterdir() if p.is_file()) == sorted(
        ["manifest.json", "_SUCCESS", run_manifest_key(new.run_id)])
    expected = source_rows(pg_url, "id = 81") if mode == "incremental" else source_rows(pg_url)
    assert table_rows(place.dataset()) == expected


# ================================================ 5. what gc must never touch
def test_a_failed_checkpointed_run_keeps_its_parts_for_the_resume(tmp_path: Path, pg_url: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    create_orders(pg_url, rows=120)
    place = Place("local", tmp_path)
    config = config_for(place, pg_url, mode="chunked", chunk_column="id", chunk_size=40, chunk_checkpoint=True)
    first = run(config)
    db_exec(pg_url, "UPDATE orders SET amount = amount + 1")
    monkeypatch.setenv("RIVET_TEST_ERROR_AT", "after_chunk_complete:1")
    failed = api.run_export(api.load_config(str(config)), EXPORT)
    monkeypatch.delenv("RIVET_TEST_ERROR_AT")
    assert failed.status == "failed"
    held = {k: v for k, v in place.objects().items() if k.startswith("data/") and
            is_own_part(k, EXPORT, failed.run_id)}
    assert held and set(held) == {p.path for p in failed.manifest_parts}  # what its failed copy lists

    done = gc_cli(config, "--keep-runs", "1", "--grace-hours", "0")
    assert done.exit_code == 0, done.output
    assert f"protected: {failed.run_id}" in done.output
    objects = place.objects()
    assert {k: objects.get(k) for k in held} == held  # the in-progress chunk run's parts stay
    assert run_manifest_key(failed.run_id) in objects
    assert gc_cli(config, "--keep-runs", "1", "--grace-hours", "0").exit_code == 0
    assert {k: place.objects().get(k) for k in held} == held

    resumed = rivet_in_process("run", "-c", str(config), "--resume", "--force")  # the first run's _SUCCESS
    assert resumed.exit_code == 0, resumed.output
    assert gc_cli(config, "--keep-runs", "1").exit_code == 0
    assert not [p for p in first.manifest_parts if (place.root / p.path).exists()]
    assert table_rows(place.dataset()) == source_rows(pg_url)


def test_gc_needs_a_rule_and_retention_is_validated_with_the_field_and_the_fix(tmp_path: Path) -> None:
    from rivet_core.config import load_config
    from rivet_core.errors import ConfigError

    place = Place("local", tmp_path)
    url = "postgresql://rivet@127.0.0.1:1/none"  # nothing here connects
    config = config_for(place, url)
    refused = gc_cli(config)
    assert refused.exit_code == 1 and "has no `retention:` block" in refused.output and "--keep-runs" in refused.output
    for block, expected in (({"grace_hours": 1}, "set keep_runs (keep the last N runs) or keep_days"),
                            ({"keep_runs": 0}, "`keep_runs` at exports[0].retention must be >= 1"),
                            ({"keep_runs": 2, "keep_weeks": 1}, "unknown field `keep_weeks`"),
                            ({"keep_days": 40_000}, "`keep_days` at exports[0].retention must be <= 36600")):
        with pytest.raises(ConfigError) as info:
            load_config(config_for(place, url, retention=block))
        assert expected in info.value.message, info.value.message
    stdout = write_config(tmp_path, source_block(url), [{"name": EXPORT, "table": "orders", "format": "csv",
                                                         "destination": {"type": "stdout"},
                                                         "retention": {"keep_runs": 1}}])
    with pytest.raises(ConfigError) as info:
        load_config(stdout)
    assert "retention keeps runs at a destination prefix" in info.value.message
    cfg = load_config(config_for(place, url, retention={"keep_days": 7, "grace_hours": 2}))
    assert policy_for(cfg.export(EXPORT)) == RetentionPolicy(keep_days=7, grace_hours=2)
    assert policy_for(cfg.export(EXPORT), keep_runs=3) == RetentionPolicy(keep_runs=3, grace_hours=2)


def test_part_keys_of_both_layouts_belong_to_their_chunk_run() -> None:
    run_id = "orders_20261201T101500.000"
    name = "orders_20261201T101500000_chunk3_0123456789abcdef.parquet"
    assert is_own_part(f"data/{name}", EXPORT, run_id) and is_own_part(name, EXPORT, run_id)
    assert not is_own_part(f"_quarantine/{run_id}/data/{name}", EXPORT, run_id)
    assert not is_own_part(f"data/{name}", EXPORT, "orders_20261201T101501.000")


# ================================================ 6. properties of the selection and of the plan
def _manifest(run_id: str, minute: int, status: str, paths: list[str], baseline: bool) -> Manifest:
    extraction = ManifestExtraction(strategy="incremental", cursor_low=None if baseline else "x")
    return Manifest(run_id=run_id, export_name=EXPORT, started_at="", status=status,
                    finished_at=(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minute)).isoformat(),
                    source=ManifestSource(engine="postgres", schema=None, table="orders", extraction=extraction),
                    destination=ManifestDestination(kind="local", uri="file:///x/"), format="parquet",
                    schema_fingerprint="xxh3:0000000000000000", row_count=0, part_count=len(paths),
                    parts=tuple(ManifestPart(part_id=i + 1, path=p, rows=0, size_bytes=1)
                                for i, p in enumerate(paths)))


@st.composite
def prefixes(draw: st.DrawFn) -> tuple[PrefixSnapshot, RetentionPolicy, bool, datetime]:
    """A prefix after a history of runs: each run lists fresh parts, sometimes shares one with
    the run before it (a carried chunk window), some failed, some delivered nothing."""
    count = draw(st.integers(1, 7))
    manifests, shared = [], None
    for i in range(count):
        status = "success" if i == count - 1 else draw(st.sampled_from(["success", "success", "failed"]))
        paths = [f"data/p{i}_{j}.parquet" for j in range(draw(st.integers(0, 2)))]
        if shared and draw(st.booleans()):
            paths.append(shared)
        shared = paths[0] if paths else shared
        manifests.append(_manifest(f"{EXPORT}_{i:02d}", i * 60, status, paths, baseline=draw(st.booleans())))
    current = manifests[-1]
    keys = sorted({p.path for m in manifests for p in m.parts} | {"manifest.json", "_SUCCESS"}
                  | {run_manifest_key(m.run_id) for m in manifests} | {"data/orphan.parquet"})
    snapshot = PrefixSnapshot(current=current, copies={run_manifest_key(m.run_id): m for m in manifests},
                              parked={}, keys=keys)
    keep_runs = draw(st.one_of(st.none(), st.integers(1, 4)))
    keep_days = draw(st.sampled_from([0.05, 0.2]) if keep_runs is None else st.sampled_from([None, 0.05, 0.2]))
    policy = RetentionPolicy(keep_runs=keep_runs, keep_days=keep_days)
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=(count - 1) * 60 + draw(st.integers(0, 600)))
    return snapshot, policy, draw(st.booleans()), now


@given(prefixes())
def test_the_plan_never_moves_what_a_live_run_lists_and_parks_copies_before_files(
        case: tuple[PrefixSnapshot, RetentionPolicy, bool, datetime]) -> None:
    snapshot, policy, accumulates, now = case
    refs = [RunRef.of(m) for m in snapshot.copies.values()]
    current = snapshot.current.run_id
    kept = kept_runs(refs, policy, now, current=current, accumulates=accumulates)
    live = live_runs(refs, kept, current=current, accumulates=accumulates)
    successful = sorted((r for r in refs if r.status == "success"), key=lambda r: r.finished_at)
    counted = [r for r in successful if r.files] if accumulates else successful
    # the policy: current always; never a failed run; at least the last keep_runs (counted) runs
    assert current in kept and current in live and live <= kept
    assert all(r.status == "success" for r in refs if r.run_id in kept)
    if policy.keep_runs is not None:
        assert {r.run_id for r in counted[-policy.keep_runs:]} <= kept
    bigger = RetentionPolicy(keep_runs=(policy.keep_runs or 0) + 1, keep_days=policy.keep_days)
    assert kept <= kept_runs(refs, bigger, now, current=current, accumulates=accumulates)  # monotone

    plan = plan_gc(snapshot, policy, now, uri="file:///x/", accumulates=accumulates, sweep_orphans=True,
                   stamp="20260101T000000Z-abcdef")
    live_files = {f for r in refs if r.run_id in live for f in r.files}
    moved = [s for s in plan.steps if s.action != "delete"]
    assert not [s for s in moved if s.key in live_files]
    assert not [s for s in moved if s.key in ("manifest.json", "_SUCCESS", run_manifest_key(current))]
    assert all(s.moved_to == f"{GC_PREFIX}{plan.stamp}/{s.key}" for s in moved)
    actions = [s.action for s in moved]
    assert actions == sorted(actions, key=lambda a: a != "park_copy")  # copies first
    parked_copies = {s.key for s in moved if s.action == "park_copy"}
    assert parked_copies == {run_manifest_key(r.run_id) for r in refs if r.run_id not in live}
    # every file only non-live runs list leaves data/, and what they list nowhere else is all that does
    stale = {f for r in refs if r.run_id not in live for f in r.files} - live_files
    assert {s.key for s in moved if s.action == "park_file"} == stale | {"data/orphan.parquet"}
    assert not [s for s in plan.steps if s.action == "delete"]  # nothing was parked before


@given(prefixes(), st.integers(0, 48))
def test_a_parked_run_is_deleted_only_past_the_grace_period_and_never_while_kept(
        case: tuple[PrefixSnapshot, RetentionPolicy, bool, datetime], hours: int) -> None:
    snapshot, policy, accumulates, now = case
    first = plan_gc(snapshot, policy, now, uri="file:///x/", accumulates=accumulates, stamp="20260101T000000Z-aaaaaa")
    moved = {s.key: s.moved_to for s in first.steps if s.action != "delete"}
    keys = [moved.get(k, k) for k in snapshot.keys]
    parked = {moved[k]: m for k, m in snapshot.copies.items() if k in moved}
    later = PrefixSnapshot(current=snapshot.current, parked=parked, keys=keys,
                           copies={k: m for k, m in snapshot.copies.items() if k not in moved})
    when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=hours)
    grace = RetentionPolicy(keep_runs=policy.keep_runs, keep_days=policy.keep_days, grace_hours=24)
    second = plan_gc(later, grace, when, uri="file:///x/", accumulates=accumulates, stamp="20260103T000000Z-bbbbbb")
    deleted = {s.key for s in second.steps if s.action == "delete"}
    if hours < 24:
        assert not deleted
        return
    refs = [RunRef.of(m) for m in snapshot.copies.values()]
    kept = kept_runs(refs, grace, when, current=snapshot.current.run_id, accumulates=accumulates)
    kept_files = {f for r in refs if r.run_id in kept for f in r.files}
    prefix = f"{GC_PREFIX}20260101T000000Z-aaaaaa/"
    assert deleted <= set(moved.values())
    assert not [k for k in deleted if k[len(prefix):] in kept_files]
    assert not [k for k in deleted if k in parked and parked[k].run_id in kept]
    assert deleted == {t for t in moved.values() if t[len(prefix):] not in kept_files
                       and not (t in parked and parked[t].run_id in kept)}


def test_copying_a_prefix_elsewhere_keeps_it_valid(tmp_path: Path) -> None:
    """Sanity of the oracle's flat rewrite: `_flatten` produces a prefix `verify` accepts."""
    from rivet_core.destination.local import LocalDestination
    from rivet_core.manifest import verify_at_destination
    from rivet_core.manifest.artifacts import write_manifest_files

    root = tmp_path / "p"
    dest = LocalDestination(root)
    data = b"PAR1" + b"\0" * 16 + b"PAR1"
    dest.write_bytes(data, "data/x.parquet")
    from rivet_core.destination import fingerprint_bytes

    xxh3, md5 = fingerprint_bytes(data)
    manifest = dataclasses.replace(_manifest(f"{EXPORT}_00", 0, "success", [], baseline=True), part_count=1,
                                   parts=(ManifestPart(part_id=1, path="data/x.parquet", rows=0, size_bytes=len(data),
                                                       content_fingerprint=xxh3, content_md5=md5),))
    write_manifest_files(dest, manifest)
    _flatten(root)
    assert (root / "x.parquet").is_file() and verify_at_destination(dest, depth="sample").passed
    shutil.rmtree(root)
