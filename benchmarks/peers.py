"""The peer exporters, one per invocation, run by the harness with .venv-bench's Python.

    .venv-bench/bin/python benchmarks/peers.py --method dlt_pyarrow --engine pg \
        --url postgresql://u@h:p/db --table orders --out DIR

Standalone on purpose: it imports none of rivet (the peers live in their own venv, pinned
in benchmarks/requirements.txt, so they never touch the project's lock). Each method uses
the library the way its documentation shows for "table → Parquet", streaming where the
library offers it, zstd level 3 (rivet's default, `ZSTD_LEVEL`) where it lets the caller
choose — the same codec work for every method; dlt writes with its own default codec
settings (it has no level knob in `sql_table`). Parquet files end up under
`--out` (the harness finds them; dlt's own state tables are skipped).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: rivet's default `compression_level` for zstd; pyarrow's own default is 1, which would
#: give the peers a cheaper encode than the export they are compared with.
ZSTD_LEVEL = 3


def _sqlalchemy_url(engine: str, url: str) -> str:
    scheme = "postgresql+psycopg2" if engine == "pg" else "mysql+pymysql"
    return scheme + url[url.index("://"):]


def dlt_export(args: argparse.Namespace, backend: str) -> None:
    import dlt
    from dlt.sources.sql_database import sql_table

    pipe = dlt.pipeline(
        pipeline_name="bench_export", pipelines_dir=str(args.out / "_dlt_pipelines"),
        destination=dlt.destinations.filesystem(bucket_url=(args.out / "data").as_uri()),
        dataset_name="bench",
    )
    # Reflection always goes through SQLAlchemy; connectorx gets its own URL (backend_kwargs).
    extra = {"backend_kwargs": {"conn": args.url}} if backend == "connectorx" else {}
    resource = sql_table(credentials=_sqlalchemy_url(args.engine, args.url), table=args.table,
                         backend=backend, chunk_size=args.batch_rows,
                         reflection_level="full_with_precision", **extra)
    pipe.run(resource, loader_file_format="parquet").raise_on_failed_jobs()


def pandas_export(args: argparse.Namespace) -> None:
    import pandas as pd
    import sqlalchemy as sa

    engine = sa.create_engine(_sqlalchemy_url(args.engine, args.url))
    (args.out / "data").mkdir(parents=True, exist_ok=True)
    try:
        with engine.connect() as conn:  # as documented: read_sql(..., chunksize=N)
            for i, frame in enumerate(pd.read_sql(sa.text(f"SELECT * FROM {args.table}"), conn,
                                                  chunksize=args.pandas_chunk)):
                frame.to_parquet(args.out / "data" / f"part-{i:05d}.parquet", engine="pyarrow",
                                 compression="zstd", compression_level=ZSTD_LEVEL, index=False)
    finally:
        engine.dispose()


def connectorx_export(args: argparse.Namespace) -> None:
    import connectorx as cx
    import pyarrow.parquet as pq

    table = cx.read_sql(args.url, f"SELECT * FROM {args.table}", return_type="arrow")
    (args.out / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, args.out / "data" / "part-0.parquet", compression="zstd",
                   compression_level=ZSTD_LEVEL)


def adbc_export(args: argparse.Namespace) -> None:
    import adbc_driver_postgresql.dbapi as adbc
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    (args.out / "data").mkdir(parents=True, exist_ok=True)
    with adbc.connect(args.url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {args.table}")
        reader = cur.fetch_record_batch()
        # numeric arrives as an opaque string; the typmod in the field metadata gives p, s.
        fields, casts = [], {}
        for i, field in enumerate(reader.schema):
            meta = field.metadata or {}
            typmod = int(meta.get(b"ADBC:postgresql:typmod", meta.get(b"POSTGRESQL:typmod", b"-1")))
            kind = meta.get(b"ADBC:postgresql:typname", meta.get(b"POSTGRESQL:type", b""))
            if kind == b"numeric" and typmod >= 4:
                precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
                casts[i] = pa.decimal128(precision, scale)
                field = pa.field(field.name, casts[i], field.nullable, field.metadata)
            fields.append(field)
        schema = pa.schema(fields)
        with pq.ParquetWriter(args.out / "data" / "part-0.parquet", schema, compression="zstd",
                             compression_level=ZSTD_LEVEL) as writer:
            for batch in reader:
                columns = list(batch.columns)
                for i, target in casts.items():
                    storage = columns[i].storage if isinstance(columns[i], pa.ExtensionArray) else columns[i]
                    columns[i] = pc.cast(storage, target)
                writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))


METHODS = {
    "dlt_pyarrow": lambda a: dlt_export(a, "pyarrow"),
    "dlt_connectorx": lambda a: dlt_export(a, "connectorx"),
    "pandas_read_sql": pandas_export,
    "connectorx": connectorx_export,
    "adbc": adbc_export,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", required=True, choices=sorted(METHODS))
    ap.add_argument("--engine", required=True, choices=("pg", "mysql"))
    ap.add_argument("--url", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--batch-rows", type=int, default=50_000)
    ap.add_argument("--pandas-chunk", type=int, default=100_000)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    METHODS[args.method](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
