"""Exports to a real S3-compatible server (SeaweedFS, SigV4) and `rivet validate` verdicts.

The oracle never trusts the tool's counters: boto3 lists and downloads what is on the
bucket, pyarrow re-reads the parts, and the result is compared with the source queried
directly (PostgreSQL / MariaDB). Damage for the validate tests is done with boto3 too.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from tests.helpers import cursor_of, db_exec, source_block, write_config
from tests.helpers import rivet as rivet_process  # the stdout tests read a real process's stream
from tests.helpers import rivet_quick as rivet  # the other runs neither crash nor pause: in-process


# ------------------------------------------------------------------------------ helpers
def _s3_destination(s3: Any, prefix: str = "exports/{export}/", **extra: Any) -> dict[str, Any]:
    return {"type": "s3", "bucket": s3.bucket, "prefix": prefix, "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK",
            **extra}


def _export(name: str, destination: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "table": name, "mode": "full", "format": "parquet",
            "destination": destination, **extra}


def _listing(s3: Any, prefix: str = "") -> dict[str, dict[str, Any]]:
    """Every object under `prefix` → {size, etag}, keys relative to `prefix`."""
    out: dict[str, dict[str, Any]] = {}
    for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix):
        for obj in page.get("Contents", []) or []:
            out[obj["Key"][len(prefix):]] = {"size": obj["Size"], "etag": obj["ETag"].strip('"')}
    return out


def _get(s3: Any, key: str) -> bytes:
    return s3.client().get_object(Bucket=s3.bucket, Key=key)["Body"].read()


def _put(s3: Any, key: str, body: bytes) -> None:
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=body)


def _run(config: Path, *args: str) -> dict[str, Any]:
    result = rivet("run", "-c", str(config), "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["runs"][0]


def _validate(config: Path) -> tuple[int, dict[str, Any]]:
    result = rivet("validate", "-c", str(config), "--format", "json")
    assert result.stdout.strip(), result.stderr
    return result.returncode, json.loads(result.stdout)["exports"][0]["verification"]


def _kinds(verification: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in verification["failures"]]


def _committed_parts(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in manifest["parts"] if p.get("status", "committed") == "committed"]


def _bucket_table(s3: Any, prefix: str, manifest: dict[str, Any]) -> pa.Table:
    tables = [pq.read_table(pa.BufferReader(_get(s3, prefix + p["path"]))) for p in _committed_parts(manifest)]
    return pa.concat_tables(tables)


def _payload_digest(ids: list[int], payloads: list[str]) -> str:
    """md5 over the payloads in id order — the same as the SQL-side checksum below."""
    ordered = [p for _, p in sorted(zip(ids, payloads, strict=True))]
    return hashlib.md5("".join(ordered).encode(), usedforsecurity=False).hexdigest()


# -------------------------------------------------------------- 1. multipart PostgreSQL export
def test_a_postgres_export_over_16mb_goes_multipart_and_lands_with_a_matching_success_marker(
        tmp_path: Path, pg_url: str, s3: Any) -> None:
    # ~25 MB of incompressible text: every row carries 8 distinct md5 digests (256 chars) ×2.
    db_exec(pg_url,
            "CREATE TABLE big AS SELECT g AS id, "
            "repeat(md5(g::text) || md5((g + 1)::text) || md5((g + 2)::text) || md5((g + 3)::text) || "
            "md5((g * 7)::text) || md5((g * 11)::text) || md5((g * 13)::text) || md5((g * 17)::text), 2) "
            "AS payload FROM generate_series(1, 48000) AS g")
    config = write_config(tmp_path, source_block(pg_url),
                          [_export("big", _s3_destination(s3), compression="none")])
    run = _run(config, "--validate")
    assert run["status"] == "success" and run["validated"] is True

    prefix = "exports/big/"
    objects = _listing(s3, prefix)
    token = re.sub(r"[^A-Za-z0-9._-]", "-", run["run_id"])
    assert {"manifest.json", f"manifest-{token}.json", "_SUCCESS"} <= set(objects)
    data_keys = sorted(k for k in objects if k.endswith(".parquet"))
    assert len(data_keys) == 1
    part_key = data_keys[0]
    assert objects[part_key]["size"] > 16 * 1024 * 1024
    assert re.fullmatch(r"[0-9a-f]{32}-\d+", objects[part_key]["etag"]), objects[part_key]["etag"]
    assert int(objects[part_key]["etag"].rsplit("-", 1)[1]) >= 2

    manifest_bytes = _get(s3, prefix + "manifest.json")
    assert _get(s3, prefix + f"manifest-{token}.json") == manifest_bytes
    assert _get(s3, prefix + "_SUCCESS") == f"xxh3:{xxhash.xxh3_64(manifest_bytes).hexdigest()}\n".encode()
    manifest = json.loads(manifest_bytes)
    assert manifest["status"] == "success" and manifest["destination"]["uri"] == f"s3://{s3.bucket}/{prefix}"
    [part] = _committed_parts(manifest)
    assert part["path"] == part_key and part["size_bytes"] == objects[part_key]["size"]

    body = _get(s3, prefix + part_key)
    assert part["content_fingerprint"] == f"xxh3:{xxhash.xxh3_64(body).hexdigest()}"
    table = pq.read_table(pa.BufferReader(body))
    ids, payloads = table.column("id").to_pylist(), table.column("payload").to_pylist()
    [(count, id_sum, digest)] = db_exec(
        pg_url, "SELECT count(*), sum(id), md5(string_agg(payload, '' ORDER BY id)) FROM big")
    assert len(ids) == len(set(ids)) == count == 48000
    assert sum(ids) == id_sum
    assert _payload_digest(ids, payloads) == digest


# ------------------------------------------------------------------- 2. rivet validate verdicts
@pytest.fixture
def small(tmp_path: Path, pg_url: str, s3: Any) -> dict[str, Any]:
    """A 300-row PostgreSQL table exported once to s3://<bucket>/exports/small/."""
    db_exec(pg_url, "CREATE TABLE small AS SELECT g AS id, md5(g::text) AS name "
                    "FROM generate_series(1, 300) AS g")
    from rivet_core.api import load_config, run_export

    config = write_config(tmp_path, source_block(pg_url), [_export("small", _s3_destination(s3))])
    # Set-up only, so in-process (the CLI run path is covered above); `rivet validate` is
    # what these tests exercise, and it always runs as a real subprocess.
    summary = run_export(load_config(config), "small")
    assert summary.status == "success", summary.error_message
    prefix = "exports/small/"
    manifest = json.loads(_get(s3, prefix + "manifest.json"))
    [part] = _committed_parts(manifest)
    return {"config": config, "prefix": prefix, "manifest": manifest, "part": part}


def test_validate_passes_on_a_clean_s3_prefix(small: dict[str, Any], s3: Any) -> None:
    code, v = _validate(small["config"])
    assert code == 0
    assert v["passed"] is True and v["failures"] == []
    assert v["parts_verified"] == 1 and v["parts_md5_verified"] == 1
    assert v["success_marker_consistent"] is True
    ids = _bucket_table(s3, small["prefix"], small["manifest"]).column("id").to_pylist()
    assert sorted(ids) == list(range(1, 301))


def test_validate_reports_a_deleted_part_as_missing_and_exits_3(small: dict[str, Any], s3: Any) -> None:
    s3.client().delete_object(Bucket=s3.bucket, Key=small["prefix"] + small["part"]["path"])
    code, v = _validate(small["config"])
    assert code == 3 and v["passed"] is False
    [failure] = v["failures"]
    assert failure["kind"] == "part_missing" and failure["path"] == small["part"]["path"]
    assert failure["code"] == "RIVET_VERIFY_PART_MISSING"


def test_validate_reports_a_resized_part_with_expected_and_actual_sizes(small: dict[str, Any], s3: Any) -> None:
    key = small["prefix"] + small["part"]["path"]
    original = _get(s3, key)
    _put(s3, key, original + b"tampered")
    code, v = _validate(small["config"])
    assert code == 3 and v["passed"] is False
    [failure] = v["failures"]
    assert failure["kind"] == "part_size_mismatch" and failure["path"] == small["part"]["path"]
    assert failure["expected"] == len(original) == small["part"]["size_bytes"]
    assert failure["actual"] == len(original) + len(b"tampered")


def test_validate_reports_a_same_size_rewrite_as_a_checksum_mismatch(small: dict[str, Any], s3: Any) -> None:
    key = small["prefix"] + small["part"]["path"]
    original = _get(s3, key)
    middle = len(original) // 2
    tampered = original[:middle] + bytes([original[middle] ^ 0xFF]) + original[middle + 1:]
    _put(s3, key, tampered)
    code, v = _validate(small["config"])
    assert code == 3 and v["passed"] is False
    [failure] = v["failures"]
    assert failure["kind"] == "part_checksum_mismatch" and failure["path"] == small["part"]["path"]
    assert failure["expected"] == small["part"]["content_md5"]
    assert failure["actual"] == base64.b64encode(hashlib.md5(tampered, usedforsecurity=False).digest()).decode()


def test_validate_reports_a_rewritten_manifest_under_the_old_marker_as_stale(
        small: dict[str, Any], s3: Any) -> None:
    old_marker = _get(s3, small["prefix"] + "_SUCCESS").decode().strip()
    edited = dict(small["manifest"], finished_at="2030-01-01T00:00:00+00:00")
    new_bytes = json.dumps(edited, indent=2).encode()
    _put(s3, small["prefix"] + "manifest.json", new_bytes)
    code, v = _validate(small["config"])
    assert code == 3 and v["passed"] is False
    assert v["manifest_self_consistent"] is True and v["parts_verified"] == 1
    [failure] = v["failures"]
    assert failure["kind"] == "success_marker_stale"
    assert failure["marker_fingerprint"] == old_marker
    assert failure["manifest_fingerprint"] == f"xxh3:{xxhash.xxh3_64(new_bytes).hexdigest()}"


def test_validate_lists_an_extra_object_as_untracked_but_still_passes(small: dict[str, Any], s3: Any) -> None:
    _put(s3, small["prefix"] + "stray/notes.txt", b"not part of any run")
    code, v = _validate(small["config"])
    assert code == 0 and v["passed"] is True
    [failure] = v["failures"]
    assert failure["kind"] == "untracked_object"
    assert failure["key"] == "stray/notes.txt" and failure["size_bytes"] == len(b"not part of any run")


def test_validate_pretty_output_prints_one_line_per_failure(small: dict[str, Any], s3: Any) -> None:
    s3.client().delete_object(Bucket=s3.bucket, Key=small["prefix"] + small["part"]["path"])
    _put(s3, small["prefix"] + "stray.bin", b"x" * 7)
    result = rivet("validate", "-c", str(small["config"]))
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("small: FAILED")
    failure_lines = [line for line in lines if line.startswith("  - ")]
    assert len(failure_lines) == 2, result.stdout
    assert "part_missing" in failure_lines[0] and small["part"]["path"] in failure_lines[0]
    assert "untracked_object" in failure_lines[1] and "stray.bin" in failure_lines[1]


# ------------------------------------------------------------------------ 3. wrong credentials
def test_wrong_s3_credentials_fail_the_run_with_one_redacted_fix_line_and_keep_the_cursor(
        tmp_path: Path, pg_url: str, s3: Any) -> None:
    db_exec(pg_url, "CREATE TABLE events (id INT PRIMARY KEY, note TEXT)",
            "INSERT INTO events SELECT g, 'n' || g FROM generate_series(1, 50) AS g")
    good = _export("events", _s3_destination(s3), mode="incremental", cursor_column="id")
    config = write_config(tmp_path, source_block(pg_url), [good])
    _run(config)
    assert cursor_of(config, "events") == "50"
    before = _listing(s3)

    db_exec(pg_url, "INSERT INTO events SELECT g, 'n' || g FROM generate_series(51, 80) AS g")
    wrong_secret = "wrong-secret-Zq81xK2p9LmN"
    bad = dict(good, destination=dict(good["destination"], secret_key_env="RIVET_BAD_SK"))
    write_config(tmp_path, source_block(pg_url), [bad])
    result = rivet("run", "-c", str(config), env={"RIVET_BAD_SK": wrong_secret})

    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert wrong_secret not in output and s3.secret_key not in output
    error_lines = [line for line in result.stderr.splitlines() if re.match(r"\s*(Error|error):", line)]
    assert len(error_lines) == 1, result.stderr
    assert "check the S3 credentials" in error_lines[0]
    assert "secret_key_env" in error_lines[0] and "access_key_env" in error_lines[0]
    assert "Traceback" not in result.stderr
    assert _listing(s3) == before  # nothing published: no part, no manifest, no marker
    assert cursor_of(config, "events") == "50"
    for report in (tmp_path / ".rivet").rglob("*"):
        if report.is_file():
            assert wrong_secret.encode() not in report.read_bytes()


# --------------------------------------------------------------------------- 4. MariaDB → S3
def test_a_mariadb_export_to_s3_lands_and_verifies(tmp_path: Path, mysql_url: str, s3: Any) -> None:
    db_exec(mysql_url, "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(40))",
            "INSERT INTO orders VALUES " + ", ".join(f"({i}, {i}.25, 'o{i}')" for i in range(1, 251)))
    config = write_config(tmp_path, source_block(mysql_url), [_export("orders", _s3_destination(s3))])
    run = _run(config, "--validate")
    assert run["status"] == "success" and run["validated"] is True
    prefix = "exports/orders/"
    manifest_bytes = _get(s3, prefix + "manifest.json")
    assert _get(s3, prefix + "_SUCCESS") == f"xxh3:{xxhash.xxh3_64(manifest_bytes).hexdigest()}\n".encode()
    manifest = json.loads(manifest_bytes)
    assert manifest["source"]["engine"] == "mysql"
    table = _bucket_table(s3, prefix, manifest)
    source = db_exec(mysql_url, "SELECT id, CAST(amount AS CHAR), note FROM orders ORDER BY id")
    got = sorted(zip(table.column("id").to_pylist(), (str(a) for a in table.column("amount").to_pylist()),
                     table.column("note").to_pylist(), strict=True))
    assert got == [tuple(r) for r in source]
    code, v = _validate(config)
    assert code == 0 and v["passed"] is True and v["parts_verified"] == len(_committed_parts(manifest))


# ------------------------------------------------------------------------------ 5. stdout CSV
def test_a_stdout_csv_export_writes_exactly_the_csv_to_stdout_and_no_manifest(
        tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE people (id INT PRIMARY KEY, name TEXT, city TEXT)",
            "INSERT INTO people SELECT g, 'p' || g, CASE WHEN g % 3 = 0 THEN 'Zürich, CH' ELSE 'Oslo' END "
            "FROM generate_series(1, 120) AS g")
    config = write_config(tmp_path, source_block(pg_url),
                          [_export("people", {"type": "stdout"}, format="csv")])
    before = set(os.listdir(tmp_path))
    result = rivet_process("run", "-c", str(config))
    assert result.returncode == 0, result.stderr
    assert "export people: SUCCESS" in result.stderr  # the summary goes to stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["id", "name", "city"]
    source = db_exec(pg_url, "SELECT id, name, city FROM people ORDER BY id")
    assert sorted((int(r[0]), r[1], r[2]) for r in rows[1:]) == [tuple(r) for r in source]
    assert len(rows) == 121
    created = {p.name for p in tmp_path.rglob("*")} - before
    assert not any(n == "_SUCCESS" or (n.startswith("manifest") and n.endswith(".json")) for n in created)


def test_a_stdout_export_is_skipped_by_validate_and_refuses_json_that_would_corrupt_the_stream(
        tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE people AS SELECT g AS id FROM generate_series(1, 5) AS g")
    config = write_config(tmp_path, source_block(pg_url),
                          [_export("people", {"type": "stdout"}, format="csv")])
    checked = rivet_process("validate", "-c", str(config), "--format", "json")
    assert checked.returncode == 0, checked.stderr
    doc = json.loads(checked.stdout)
    assert doc["exports"] == [] and doc["errors"] == []
    assert doc["warnings"] == [{"export_name": "people", "warning": "stdout destination has no manifest"}]

    refused = rivet_process("run", "-c", str(config), "--json")
    assert refused.returncode == 1 and refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert line.startswith("Error: --json cannot be used with a stdout destination")
