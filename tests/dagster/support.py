"""Helpers for the Dagster tests: configs against real PostgreSQL, and an independent oracle.

The oracle reads the destination itself (local files, or boto3 against the real S3 server),
parses the manifests and re-reads the parts with pyarrow; it never trusts the tool's
counters. The source is queried directly with psycopg.

Source table `orders` (PostgreSQL): 600 rows, `created_at` every 10 minutes from
2026-03-01 00:00 (144 rows per day, so row 144 sits exactly on 2026-03-02 00:00 — a
window boundary), `updated_at` = `created_at` + 5 minutes, `note` NULL on every 3rd row.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tests.helpers import db_exec, source_block, write_config

#: Dagster's Beta/Preview/Supersession notices and its own internal deprecations are not ours.
DAGSTER_NOISE = [
    "ignore::dagster.BetaWarning",
    "ignore::dagster.PreviewWarning",
    "ignore::dagster.SupersessionWarning",
    "ignore::DeprecationWarning:dagster",
    "ignore::DeprecationWarning:dagster_aws",
    "ignore:.*dagster_run.*:DeprecationWarning",
    "ignore:.*run_request_for_partition.*:DeprecationWarning",
]

START_DATE = "2026-03-01"
ROWS = 600
SIDECARS = ("manifest.json", "_SUCCESS")


# ------------------------------------------------------------------------------ source
def create_orders(url: str, rows: int = ROWS) -> None:
    db_exec(
        url,
        """CREATE TABLE orders (
             id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL,
             note text, created_at timestamp NOT NULL, updated_at timestamp NOT NULL)""",
        f"""INSERT INTO orders
            SELECT g, 'c' || (g % 17), round((g * 7.31) % 5000, 2),
                   CASE WHEN g % 3 = 0 THEN NULL ELSE 'note ' || g END,
                   timestamp '{START_DATE}' + g * interval '10 minutes',
                   timestamp '{START_DATE}' + g * interval '10 minutes' + interval '5 minutes'
            FROM generate_series(0, {rows - 1}) g""",
    )


def source_rows(url: str, where: str = "TRUE") -> dict[int, Decimal]:
    """id → amount, straight from PostgreSQL."""
    return {int(i): a for i, a in db_exec(url, f"SELECT id, amount FROM orders WHERE {where} ORDER BY id")}


def day_where(day: str) -> str:
    nxt = (date.fromisoformat(day) + timedelta(days=1)).isoformat()
    return f"created_at >= '{day}' AND created_at < '{nxt}'"


# ------------------------------------------------------------------------------ config
def export_block(name: str, mode: str, destination: dict[str, Any], **extra: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "table": "orders", "mode": mode, "format": "parquet",
                             "destination": destination}
    if mode == "incremental":
        block["cursor_column"] = "updated_at"
    if mode == "time_window":
        block.update(time_column="created_at", days_window=3, dagster={"start_date": START_DATE})
    block.update(extra)
    return block


def local_destination(name: str) -> dict[str, Any]:
    return {"type": "local", "path": f"out/{name}"}


def s3_destination(s3: Any, name: str) -> dict[str, Any]:
    return {"type": "s3", "bucket": s3.bucket, "prefix": f"exports/{name}/", "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}


def orders_config(tmp: Path, url: str, exports: list[dict[str, Any]], **top: Any) -> Path:
    return write_config(tmp, source_block(url), exports, **top)


# ------------------------------------------------------------------------------ destination view
class DestView:
    """Read-only-ish view of one export's root at the destination (keys relative to it)."""

    uri: str

    def keys(self) -> dict[str, int]:
        """Every object under the export root → size."""
        raise NotImplementedError

    def read(self, key: str) -> bytes:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    # -- oracle ------------------------------------------------------------------
    def manifests(self, sub: str = "") -> list[dict[str, Any]]:
        """Every `manifest*.json` directly under `sub`, parsed."""
        out = []
        for key in sorted(self.keys()):
            rest = key[len(sub):] if key.startswith(sub) else None
            if rest is not None and "/" not in rest and rest.startswith("manifest") and rest.endswith(".json"):
                out.append(json.loads(self.read(key)))
        return out

    def success_manifests(self, sub: str = "") -> list[dict[str, Any]]:
        """One success manifest per run (manifest.json repeats its run's copy)."""
        return list({m["run_id"]: m for m in self.manifests(sub) if m.get("status") == "success"}.values())

    def current_manifest(self, sub: str = "") -> dict[str, Any] | None:
        keys = self.keys()
        return json.loads(self.read(sub + "manifest.json")) if sub + "manifest.json" in keys else None

    def data_keys(self, sub: str = "") -> list[str]:
        """Data files of the prefix `sub`, relative to it: under its `data/` folder, and any
        file directly under it that is not a sidecar (the flat layout of earlier versions) —
        nothing quarantined (docs/adr/0007-readable-layout-and-retention.md)."""
        out = []
        for key in self.keys():
            if not key.startswith(sub):
                continue
            rest = key[len(sub):]
            name = rest[len("data/"):] if rest.startswith("data/") else rest
            if "/" in name or rest in SIDECARS or rest.startswith("manifest"):
                continue
            out.append(rest)
        return sorted(out)

    def read_part(self, key: str) -> pa.Table:
        data = self.read(key)
        return pacsv.read_csv(io.BytesIO(data)) if key.endswith(".csv") else pq.read_table(io.BytesIO(data))

    def parts_table(self, manifests: list[dict[str, Any]], sub: str = "") -> pa.Table:
        """Every row of every committed part the manifests list (each part once)."""
        paths: dict[str, None] = {}
        for m in manifests:
            for part in m["parts"]:
                if part.get("status", "committed") == "committed":
                    paths[sub + part["path"]] = None
        tables = [self.read_part(p) for p in paths]
        return pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})


class LocalView(DestView):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.uri = f"file://{root.resolve()}/"

    def keys(self) -> dict[str, int]:
        if not self.root.exists():
            return {}
        return {p.relative_to(self.root).as_posix(): p.stat().st_size
                for p in self.root.rglob("*") if p.is_file()}

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def delete(self, key: str) -> None:
        (self.root / key).unlink()


class S3View(DestView):
    def __init__(self, s3: Any, prefix: str) -> None:
        self.s3, self.prefix, self.client = s3, prefix, s3.client()
        self.uri = f"s3://{s3.bucket}/{prefix}"

    def keys(self) -> dict[str, int]:
        out = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket,
                                                                           Prefix=self.prefix):
            for obj in page.get("Contents", []) or []:
                out[obj["Key"][len(self.prefix):]] = obj["Size"]
        return out

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.s3.bucket, Key=self.prefix + key)["Body"].read()

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.s3.bucket, Key=self.prefix + key)


@dataclass
class Target:
    """Where a test's exports go: `destination(name)` for the config, `view(name)` for the oracle."""

    kind: str
    tmp: Path
    s3: Any = None

    def destination(self, name: str) -> dict[str, Any]:
        return local_destination(name) if self.kind == "local" else s3_destination(self.s3, name)

    def view(self, name: str) -> DestView:
        if self.kind == "local":
            return LocalView(self.tmp / "out" / name)
        return S3View(self.s3, f"exports/{name}/")


def id_amounts(table: pa.Table) -> dict[int, Decimal]:
    ids = table.column("id").to_pylist()
    amounts = [Decimal(str(a)).quantize(Decimal("0.01")) for a in table.column("amount").to_pylist()]
    assert len(ids) == len(set(ids)), "a row appears twice at the destination"
    return dict(zip(ids, amounts, strict=True))


# ------------------------------------------------------------------------------ dagster
#: The jobs an export had before `dagster.jobs: none` became the default (they remain with
#: `per_export`), by name suffix → the run kind of rivet_dagster/chunked.py `RunTargets`.
_JOB_KINDS = (("_publish_job", "publish"), ("_manifest_job", "manifest"), ("_reconcile_job", "reconcile"),
              ("_job", "chunks"))


def export_selection(job: str) -> tuple[set[dg.AssetKey], set[dg.AssetCheckKey] | None]:
    """What the per-export job named `job` ran (`<asset key path joined by __>` + `_job`,
    `_manifest_job`, `_publish_job`, `_reconcile_job`): its assets, and its checks when only
    some (None: every check of those assets)."""
    for suffix, kind in _JOB_KINDS:
        if job.endswith(suffix):
            key = dg.AssetKey(job[: -len(suffix)].split("__"))
            manifest = dg.AssetKey([*key.path[:-1], f"{key.path[-1]}_manifest"])
            if kind == "reconcile":
                return set(), {dg.AssetCheckKey(manifest, "reconcile")}
            return {"publish": {key, manifest}, "manifest": {manifest}, "chunks": {key}}[kind], None
    raise AssertionError(f"{job!r} is not the name of a job of an export")


def request_job(request: dg.RunRequest) -> str:
    """The per-export job a run request of the planner stands for: its `job_name` with
    `dagster.jobs: per_export`, else the name that job had, from the request's kind (tag
    `rivet/request`) and its selection."""
    if request.job_name:
        return request.job_name
    kind = request.tags["rivet/request"]
    first = request.asset_check_keys[0].asset_key if kind == "reconcile" else request.asset_selection[0]
    base = "__".join(first.path)
    base = base.removesuffix("_manifest") if kind in ("reconcile", "manifest") else base
    return base + {"publish": "_publish_job", "manifest": "_manifest_job", "reconcile": "_reconcile_job",
                   "chunks": "_job"}[kind]


def export_state(cursor: str | None, export: str = "orders_chunked") -> dict[str, Any]:
    """One export's state in the planner sensor's cursor (`{"exports": {<export>: …}}`)."""
    return dict(json.loads(cursor or "{}").get("exports", {}).get(export, {}))


def with_export_state(cursor: str | None, export: str = "orders_chunked", *, drop: tuple[str, ...] = (),
                      **changes: Any) -> str:
    """The planner's cursor with one export's state changed (`changes`) and keys `drop`ped."""
    states = json.loads(cursor or "{}").get("exports", {})
    state = {k: v for k, v in {**states.get(export, {}), **changes}.items() if k not in drop}
    return json.dumps({"exports": {**states, export: state}})


def drop_planned_at(cursor: str | None) -> str | None:
    """The cursor as a full planner interval later: every export's `planned_at` dropped."""
    if not cursor:
        return cursor
    states = json.loads(cursor).get("exports", {})
    return json.dumps({"exports": {k: {f: v for f, v in s.items() if f != "planned_at"} for k, s in states.items()}})


def job_def(defs: dg.Definitions, job: str) -> dg.JobDefinition:
    """`job` when the definitions have it (a test's own job, `dagster.jobs: per_export`);
    else what the export's job of that name ran (`export_selection`), selected on Dagster's
    implicit asset job — how the default definitions' schedules and planner launch it."""
    if defs.get_repository_def().has_job(job):
        return defs.resolve_job_def(job)
    assets, checks = export_selection(job)
    return defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection=assets,
                                                                  asset_check_selection=checks)


def run_job(defs: dg.Definitions, job: str, instance: dg.DagsterInstance, **kw: Any) -> Any:
    return job_def(defs, job).execute_in_process(instance=instance, raise_on_error=False, **kw)


def materialization(result: Any) -> dg.AssetMaterialization:
    events = result.get_asset_materialization_events()
    assert len(events) == 1, f"expected one materialization, got {len(events)}"
    return events[0].materialization


def meta(mat: dg.AssetMaterialization) -> dict[str, Any]:
    """Materialization metadata as plain values."""
    return {k: v.value for k, v in mat.metadata.items()}


def check_evaluations(result: Any) -> dict[str, Any]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def with_jobs(defs: dg.Definitions, *jobs: Any, assets: list[Any] | None = None) -> dg.Definitions:
    return dg.Definitions.merge(defs, dg.Definitions(jobs=list(jobs), assets=assets or []))


def check_only_job(name: str, key: dg.AssetKey, check: str = "manifest_verified") -> Any:
    return dg.define_asset_job(name, selection=dg.AssetSelection.checks(dg.AssetCheckKey(key, check)))

