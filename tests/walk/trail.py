"""The model-based walk's world: export shapes, the source model, and the reader's view.

This module owns three things the state machine in `tests/walk/test_trail_walk.py` needs
and keeps them free of the project's own readers and counters:

- `Shape`: one export configuration drawn by the walk (mode × format × table format ×
  local/S3 × partition_by × merge_on × retention, plus an optional neighbour export nested
  under the primary's `data/`); `valid_shapes()` lists only the combinations the config
  accepts (docs/config-reference.md), so no draw is wasted on a refusal;
- `SourceModel`: the source table kept twice, as a SQLite file `rivet` reads and as a
  Python dict the model reasons about, with a logical clock as the incremental cursor;
- `Area` (local disk or the S3 server) and `reader_view()`: what a reader sees, read with
  pyarrow (Parquet/CSV parts a manifest lists, parsed from the JSON here), delta-rs
  (`DeltaTable(...).to_pyarrow_table()`) or pyiceberg (a catalog scan) — never
  `rivet_core`'s readers.

A row is the tuple `(id, k, v, updated_at, d)`; `k` is the `merge_on` key (nullable and
sometimes duplicated on purpose), `updated_at` the cursor, `d` the date that `partition_by`
and `time_window` use.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import json
import os
import shutil
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

Row = tuple[int, int | None, str, int, str | None]
COLUMNS = ("id", "k", "v", "updated_at", "d")
MODES = ("full", "incremental", "chunked", "time_window")
TODAY = dt.datetime.now(dt.UTC).date()
#: `time_window` exports rows with d >= today - DAYS_WINDOW (docs/modes.md).
DAYS_WINDOW = 2
#: The dates rows are drawn from: a week ending today, so buckets and windows stay few.
DATES = tuple((TODAY - dt.timedelta(days=n)).isoformat() for n in range(5, -1, -1))
POINTS = ("during_source_read", "after_source_read", "after_file_write", "after_manifest_update",
          "after_table_commit", "after_cursor_commit")


@dataclass(frozen=True)
class Shape:
    """One export configuration of the walk; `label` is how an env var names it."""

    mode: str
    fmt: str = "parquet"
    table_format: str | None = None
    where: str = "local"
    partition_by: bool = False
    merge_on: bool = False
    retention: bool = False
    nested: bool = False

    @property
    def label(self) -> str:
        bits = [self.mode, self.table_format or self.fmt, self.where]
        bits += [flag for flag in ("partition_by", "merge_on", "retention", "nested") if getattr(self, flag)]
        return "-".join(bits)

    @property
    def is_table(self) -> bool:
        return self.table_format is not None

    @property
    def appends(self) -> bool:
        """Incremental without merge_on: the dataset is every version fetched."""
        return self.mode == "incremental" and not self.merge_on


def valid_shapes() -> list[Shape]:
    """Every combination the config accepts (docs/config-reference.md, `exports`)."""
    shapes = []
    for mode, kind, where, part, merge, keep, nested in itertools.product(
            MODES, ("parquet", "csv", "delta", "iceberg"), ("local", "s3"), *[(False, True)] * 4):
        table_format = kind if kind in ("delta", "iceberg") else None
        if merge and not (mode == "incremental" and table_format):
            continue  # merge_on needs mode: incremental and a table
        if keep and (table_format or part):
            continue  # retention is refused with a table; gc of {partition} is outside the walk
        if part and mode == "time_window":
            continue  # partition_by is not compatible with time_window
        if part and (merge or (table_format == "iceberg" and mode in ("full", "chunked"))):
            continue  # refused at load: a bucket's table cannot see a row move out (docs/modes.md)
        if nested and not (keep and where == "local" and mode == "full" and kind == "parquet"):
            continue  # the nested neighbour is the retention-sweep case
        shapes.append(Shape(mode, "parquet" if table_format else kind, table_format, where, part, merge, keep,
                            nested))
    return shapes


def shapes_from_env(value: str | None) -> list[Shape]:
    """`RIVET_WALK_SHAPE=label[,label…]` restricts the draw: a whole label names that one
    shape, a prefix every shape it starts (`incremental-delta` matches local and S3, with
    and without partition_by and merge_on)."""
    shapes = valid_shapes()
    if not value:
        return shapes
    wanted = [w.strip() for w in value.split(",") if w.strip()]
    labels = {s.label for s in shapes}
    chosen = [s for s in shapes if s.label in wanted]  # an exact label names one shape
    chosen += [s for s in shapes if s not in chosen and any(w not in labels and s.label.startswith(w + "-")
                                                            for w in wanted)]
    if not chosen:
        raise ValueError(f"RIVET_WALK_SHAPE={value!r} matches no shape; e.g. {shapes[0].label}")
    return chosen


# --------------------------------------------------------------------------- the source
@dataclass
class SourceModel:
    """The source table in SQLite and its model; every change bumps the logical clock, which
    is the row's `updated_at` (the incremental cursor only grows, docs/modes.md)."""

    path: Path
    rows: dict[int, Row] = field(default_factory=dict)
    clock: int = 0
    next_id: int = 1

    def create(self) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, k INTEGER, v TEXT NOT NULL, "
                       "updated_at INTEGER NOT NULL, d DATE)")

    def _write(self, sql: str, params: Iterable[Any]) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute(sql, tuple(params))

    def insert(self, k_choice: str, d: str | None) -> Row:
        self.clock += 1
        rid = self.next_id
        self.next_id += 1
        existing = sorted({r[1] for r in self.rows.values() if r[1] is not None})
        k = None if k_choice == "null" else existing[-1] if k_choice == "dup" and existing else rid
        row = (rid, k, f"v{rid}.{self.clock}", self.clock, d)
        self._write("INSERT INTO items VALUES (?, ?, ?, ?, ?)", row)
        self.rows[rid] = row
        return row

    def update(self, rid: int, d: str | None, move: bool) -> Row:
        self.clock += 1
        old = self.rows[rid]
        row = (rid, old[1], f"v{rid}.{self.clock}", self.clock, d if move else old[4])
        self._write("UPDATE items SET v = ?, updated_at = ?, d = ? WHERE id = ?", (row[2], row[3], row[4], rid))
        self.rows[rid] = row
        return row

    def delete(self, rid: int) -> None:
        self._write("DELETE FROM items WHERE id = ?", (rid,))
        del self.rows[rid]


# --------------------------------------------------------------------------- where the files are
class Area:
    """Local disk or an S3 bucket, seen as keys under a root: list, read, delete."""

    def __init__(self, root: str, *, local: Path | None = None, s3: Any = None) -> None:
        self.root = root.strip("/")
        self.local = local
        self.s3 = s3

    def destination(self, sub: str) -> dict[str, Any]:
        if self.local is not None:
            return {"type": "local", "path": str(self.local / self.root / sub)}
        return {"type": "s3", "bucket": self.s3.bucket, "prefix": f"{self.root}/{sub}/", "endpoint": self.s3.endpoint,
                "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}

    def uri(self, sub: str) -> str:
        if self.local is not None:
            return str(self.local / self.root / sub)
        return f"s3://{self.s3.bucket}/{self.root}/{sub}"

    def keys(self, sub: str) -> list[str]:
        """Every object below `sub`, relative to it."""
        if self.local is not None:
            base = self.local / self.root / sub
            return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()) if base.exists() else []
        prefix = f"{self.root}/{sub}/"
        out: list[str] = []
        for page in self.s3.client().get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket, Prefix=prefix):
            out += [o["Key"][len(prefix):] for o in page.get("Contents", [])]
        return sorted(out)

    def read(self, sub: str, key: str) -> bytes:
        if self.local is not None:
            return (self.local / self.root / sub / key).read_bytes()
        body = self.s3.client().get_object(Bucket=self.s3.bucket, Key=f"{self.root}/{sub}/{key}")["Body"]
        return body.read()

    def remove(self, sub: str) -> None:
        """`rm -rf` of a folder (an operator's mistake, or a lifecycle rule)."""
        if self.local is not None:
            shutil.rmtree(self.local / self.root / sub, ignore_errors=True)
            return
        client = self.s3.client()
        keys = [{"Key": f"{self.root}/{sub}/{k}"} for k in self.keys(sub)]
        for i in range(0, len(keys), 1000):
            client.delete_objects(Bucket=self.s3.bucket, Delete={"Objects": keys[i:i + 1000]})

    def storage_options(self) -> dict[str, str]:
        if self.s3 is None:
            return {}
        return {"AWS_ENDPOINT_URL": self.s3.endpoint, "AWS_ACCESS_KEY_ID": self.s3.access_key,
                "AWS_SECRET_ACCESS_KEY": self.s3.secret_key, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
                "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def iceberg_io(self) -> dict[str, str]:
        if self.s3 is None:
            return {}
        return {"s3.endpoint": self.s3.endpoint, "s3.access-key-id": self.s3.access_key,
                "s3.secret-access-key": self.s3.secret_key, "s3.region": "us-east-1"}


# --------------------------------------------------------------------------- the reader's view
def normalize(table: pa.Table) -> list[Row]:
    """Rows of any reader as comparable tuples (dates as ISO text, whatever the reader typed)."""
    if table.num_rows == 0:
        return []
    cols = [table.column(c).to_pylist() for c in COLUMNS]
    rows = []
    for rid, k, v, upd, d in zip(*cols, strict=True):
        rows.append((int(rid), None if k is None else int(k), str(v), int(upd),
                     None if d in (None, "") else str(d)[:10]))
    return sorted(rows, key=repr)


def _read_part(data: bytes, fmt: str) -> pa.Table:
    if fmt == "csv":
        return pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
            column_types={"v": pa.string(), "d": pa.string()}, strings_can_be_null=True))
    return pq.read_table(io.BytesIO(data))


def manifest_rows(area: Area, sub: str, fmt: str, *, every_run: bool, read: bool = True) -> list[Row]:
    """The parts a reader is told to read (docs/manifest.md, "Layout"): the current
    `manifest.json`'s, or — for an incremental dataset, every run's parts together — those of
    each success run copy `manifest-<run_id>.json` still at the prefix, from the last run
    that started from nothing (no `cursor_low`: the first run or a full refresh) on
    (docs/adr/0007-readable-layout-and-retention.md, "What current is"). Raises ViewBroken
    when a listed part is not there."""
    keys = area.keys(sub)
    names = [k for k in keys if "/" not in k and k.startswith("manifest") and k.endswith(".json")]
    names = [n for n in names if n != "manifest.json"] if every_run else [n for n in names if n == "manifest.json"]
    manifests = [json.loads(area.read(sub, name)) for name in names]
    manifests = sorted((m for m in manifests if m.get("status") == "success"), key=lambda m: m["started_at"])
    baselines = [i for i, m in enumerate(manifests)
                 if ((m.get("source") or {}).get("extraction") or {}).get("cursor_low") is None]
    parts: dict[str, None] = {}
    for manifest in manifests[baselines[-1] if baselines else 0:]:
        for part in manifest.get("parts", []):
            if part.get("status", "committed") == "committed":
                parts[part["path"]] = None
    present = set(keys)
    rows: list[Row] = []
    for path in parts:
        if path not in present:
            raise ViewBroken(f"{sub}: the manifest lists {path}, which is not there")
        if read:  # `read=False`: only whether the trail's files are there (a table's manifest)
            rows += normalize(_read_part(area.read(sub, path), fmt))
    return rows


class ViewBroken(Exception):
    """What a reader gets when the data it is pointed at cannot be read."""


def delta_rows(area: Area, sub: str) -> list[Row]:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return normalize(DeltaTable(area.uri(sub), storage_options=area.storage_options()).to_pyarrow_table())
    except TableNotFoundError:
        return []
    except (OSError, Exception) as exc:  # noqa: BLE001 - delta-rs raises its own kinds for a missing file
        raise ViewBroken(f"{sub}: delta-rs cannot read the table: {str(exc).splitlines()[0][:200]}") from exc


def iceberg_catalog(url: str, area: Area) -> Any:
    """The SQL catalog the export registers its table in (rivet names its catalog `rivet`)."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("rivet", uri=url.replace("postgresql://", "postgresql+psycopg://"), **area.iceberg_io())


def iceberg_rows(catalog_url: str, area: Area, identifier: str) -> list[Row]:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = iceberg_catalog(catalog_url, area)
    try:
        table = catalog.load_table(identifier)
        return normalize(table.scan().to_arrow())
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    except Exception as exc:  # noqa: BLE001 - a missing data file surfaces as FileNotFoundError or an S3 error
        raise ViewBroken(f"{identifier}: pyiceberg cannot scan the table: {str(exc).splitlines()[0][:200]}") from exc
    finally:
        catalog.engine.dispose()


def bucket_label(d: str | None) -> str:
    """The folder a row of a day-granularity `partition_by` export lands in (docs/modes.md)."""
    return "__HIVE_DEFAULT_PARTITION__" if d is None else d


def bucket_folders(area: Area, sub: str) -> list[str]:
    """The `d=<label>` folders a Hive reader globs at the export's root."""
    return sorted({k.split("/", 1)[0] for k in area.keys(sub) if k.startswith("d=")})


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default
