"""`rivet init`: scaffold a commented rivet.yaml from a live database (see rivet_core/ops/scaffold.py)."""

from __future__ import annotations

from pathlib import Path

import click

from rivet_core.cli.shared import guard
from rivet_core.introspect.heuristics import SMALL_TABLE_ROWS


@click.command("init")
@click.option("--source-env", required=True, metavar="VAR",
              help="Environment variable holding the source URL (written as url_env; the URL never is).")
@click.option("--table", help="One table (`name` or `schema.name`).")
@click.option("--schema", help="Schema to scan (PostgreSQL default: public; MySQL: the URL's database).")
@click.option("--include", multiple=True, metavar="GLOB", help="Only tables matching GLOB (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip tables matching GLOB (repeatable).")
@click.option("-o", "--output", default="rivet.yaml", show_default=True, type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@click.option("--output-dir", default="output", show_default=True,
              help="Local destination root (relative to the config file) when no --s3-bucket.")
@click.option("--s3-bucket", help="Write to this S3 bucket instead of local disk.")
@click.option("--s3-prefix", default="rivet/", show_default=True)
@click.option("--s3-region")
@click.option("--s3-endpoint", help="S3-compatible endpoint (loopback, e.g. MinIO/SeaweedFS).")
@click.option("--s3-access-key-env", metavar="VAR")
@click.option("--s3-secret-key-env", metavar="VAR")
@click.option("--small-rows", default=SMALL_TABLE_ROWS, show_default=True, type=click.IntRange(min=0),
              help="Tables with at most this many rows are exported in full.")
@click.option("--chunk-size", type=click.IntRange(min=1), help="chunk_size for chunked exports (default: by table size).")
@guard
def init(source_env: str, table: str | None, schema: str | None, include: tuple[str, ...],
         exclude: tuple[str, ...], output: str, force: bool, fmt: str, output_dir: str,
         s3_bucket: str | None, s3_prefix: str, s3_region: str | None, s3_endpoint: str | None,
         s3_access_key_env: str | None, s3_secret_key_env: str | None, small_rows: int,
         chunk_size: int | None) -> int:
    """Introspect a database and write a commented rivet.yaml (modes chosen per table)."""
    # scaffold pulls in the sources, yaml and pyarrow: imported only when `init` runs.
    from rivet_core.ops.scaffold import InitOptions, write_scaffold

    options = InitOptions(
        source_env=source_env, table=table, schema=schema, include=include, exclude=exclude,
        s3_bucket=s3_bucket, s3_prefix=s3_prefix, s3_region=s3_region, s3_endpoint=s3_endpoint,
        s3_access_key_env=s3_access_key_env, s3_secret_key_env=s3_secret_key_env,
        output_dir=output_dir, format=fmt, small_rows=small_rows, chunk_size=chunk_size,
    )
    exports = write_scaffold(options, Path(output), force=force)
    for exp in exports:
        s = exp.suggestion
        flag = "  [REVIEW]" if s.review or s.overrides or exp.notes else ""
        click.echo(f"{exp.name:30} {s.mode:12} {s.reason}{flag}", err=True)
    click.echo(f"wrote {output} ({len(exports)} export(s)); next: rivet check -c {output} --type-report",
               err=True)
    return 0
