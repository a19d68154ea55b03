"""`rivet init`: scaffold a commented rivet.yaml from a live database (see rivet_core/ops/scaffold.py),
or with `--discover` Rivet's JSON discovery artifact (rivet_core/ops/init_modes.py)."""

from __future__ import annotations

from pathlib import Path

import click

from rivet_core.cli.shared import guard
from rivet_core.introspect.heuristics import SMALL_TABLE_ROWS


def _usage(source: str | None, source_env: str | None, source_file: str | None, discover: bool,
           buckets: dict[str, str | None]) -> None:
    """Rivet's argument rules (its clap groups): exactly one source flag; `--discover` writes
    no destination; GCS and S3 exclude each other. A breach is a usage error (exit 2)."""
    given = [flag for flag, value in (("--source", source), ("--source-env", source_env),
                                      ("--source-file", source_file)) if value is not None]
    if not given:
        raise click.UsageError("the following required arguments were not provided: "
                               "<--source <SOURCE>|--source-env <ENV_VAR>|--source-file <PATH>>")
    if len(given) > 1:
        raise click.UsageError(f"the argument '{given[0]}' cannot be used with '{given[1]}'")
    set_ = [flag for flag, value in buckets.items() if value is not None]
    if discover and set_:
        raise click.UsageError(f"the argument '--discover' cannot be used with '{set_[0]}' (--discover writes "
                               "a JSON artifact, not a scaffold with a destination)")
    if buckets["--gcs-bucket"] and buckets["--s3-bucket"]:
        raise click.UsageError("the argument '--gcs-bucket' cannot be used with '--s3-bucket'")
    if buckets["--gcs-credentials-file"] and not buckets["--gcs-bucket"]:
        raise click.UsageError("the argument '--gcs-credentials-file' requires '--gcs-bucket'")


@click.command("init")
@click.option("--source-env", metavar="VAR",
              help="Environment variable holding the source URL (written as url_env; the URL never is).")
@click.option("--source", "source", metavar="URL",
              help="The source URL itself (Rivet's flag: visible in shell history; the scaffold says "
                   "url_env: DATABASE_URL and never holds it).")
@click.option("--source-file", metavar="PATH", help="A file whose first line is the source URL (written as url_file).")
@click.option("--table", help="One table (`name` or `schema.name`).")
@click.option("--schema", help="Schema to scan (PostgreSQL default: public; MySQL: the URL's database).")
@click.option("--include", multiple=True, metavar="GLOB", help="Only tables matching GLOB (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip tables matching GLOB (repeatable).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Where to write (default: rivet.yaml; with --discover: stdout).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--discover", is_flag=True, help="Write Rivet's JSON discovery artifact instead of a YAML scaffold.")
@click.option("--mode", help="Force this mode on every export: full, incremental, chunked or time_window.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True)
@click.option("--output-dir", default="output", show_default=True,
              help="Local destination root (relative to the config file) when no --s3-bucket/--gcs-bucket.")
@click.option("--s3-bucket", help="Write to this S3 bucket instead of local disk.")
@click.option("--s3-prefix", default="rivet/", show_default=True)
@click.option("--s3-region")
@click.option("--s3-endpoint", help="S3-compatible endpoint (loopback, e.g. MinIO/SeaweedFS).")
@click.option("--s3-access-key-env", metavar="VAR")
@click.option("--s3-secret-key-env", metavar="VAR")
@click.option("--gcs-bucket", help="Write to this GCS bucket (each export under exports/<export>/), as Rivet's.")
@click.option("--gcs-credentials-file", metavar="PATH", help="credentials_file for --gcs-bucket (default: ADC).")
@click.option("--tls", type=click.Choice(["disable", "require", "verify-ca", "verify-full"]), metavar="MODE",
              help="TLS for init's connection and the scaffold's source.tls (Rivet's flag).")
@click.option("--tls-ca", metavar="PATH", help="PEM CA for --tls verify-ca/verify-full, written as ca_file.")
@click.option("--small-rows", default=SMALL_TABLE_ROWS, show_default=True, type=click.IntRange(min=0),
              help="Tables with at most this many rows are exported in full.")
@click.option("--chunk-size", type=click.IntRange(min=1), help="chunk_size for chunked exports (default: by table size).")
@guard
def init(source_env: str | None, source: str | None, source_file: str | None, table: str | None,
         schema: str | None, include: tuple[str, ...], exclude: tuple[str, ...], output: str | None, force: bool,
         discover: bool, mode: str | None, fmt: str, output_dir: str, s3_bucket: str | None, s3_prefix: str,
         s3_region: str | None, s3_endpoint: str | None, s3_access_key_env: str | None,
         s3_secret_key_env: str | None, gcs_bucket: str | None, gcs_credentials_file: str | None,
         small_rows: int, chunk_size: int | None, tls: str | None = None, tls_ca: str | None = None) -> int:
    """Introspect a database and write a commented rivet.yaml (modes chosen per table)."""
    _usage(source, source_env, source_file, discover,
           {"--s3-bucket": s3_bucket, "--s3-region": s3_region, "--gcs-bucket": gcs_bucket,
            "--gcs-credentials-file": gcs_credentials_file})
    if tls_ca and not tls:
        raise click.UsageError("the argument '--tls-ca <PATH>' requires '--tls <MODE>'")
    # scaffold pulls in the sources, yaml and pyarrow: imported only when `init` runs.
    from rivet_core.ops.scaffold import InitOptions, write_discovery, write_scaffold

    options = InitOptions(
        source_env=source_env, source_url=source, source_file=source_file, mode=mode, table=table, schema=schema,
        include=include, exclude=exclude, s3_bucket=s3_bucket, s3_prefix=s3_prefix, s3_region=s3_region,
        s3_endpoint=s3_endpoint, s3_access_key_env=s3_access_key_env, s3_secret_key_env=s3_secret_key_env,
        gcs_bucket=gcs_bucket, gcs_credentials_file=gcs_credentials_file, tls=tls, tls_ca=tls_ca,
        output_dir=output_dir, format=fmt, small_rows=small_rows, chunk_size=chunk_size,
    )
    if discover:
        text = write_discovery(options)
        if output is None:
            click.echo(text)
        else:
            from rivet_core.cli.shared import write_report

            write_report(output, text)
            click.echo(f"wrote {output}", err=True)
        return 0
    output = output or "rivet.yaml"
    exports = write_scaffold(options, Path(output), force=force)
    for exp in exports:
        s = exp.suggestion
        flag = "  [REVIEW]" if s.review or s.overrides or exp.notes else ""
        click.echo(f"{exp.name:30} {s.mode:12} {s.reason}{flag}", err=True)
    click.echo(f"wrote {output} ({len(exports)} export(s)); next: rivet check -c {output} --type-report",
               err=True)
    return 0
