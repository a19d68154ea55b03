"""`exports[].dagster.verify_depth`: the depth of `manifest_verified` (issue 15 item 1).

A chunked export materialized as Dagster chunk partitions (each window in its own run, the
manifest built from file_log by `<export>_manifest`) carries every part's fingerprints —
content hash, MD5 and per-column checksums — and a `full` check catches a byte changed
inside a part at the same size, which `sample` (the default) cannot see on a local prefix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from rivet_core.config import load_config
from rivet_dagster import build_definitions
from tests.dagster.support import Target, check_evaluations, check_only_job, run_job, with_jobs
from tests.dagster.test_chunked import (
    EXPORT,
    INITIAL_KEYS,
    MANIFEST_JOB,
    chunked_config,
    materialize,
    orders_550,  # noqa: F401 - fixture
    tick,
)


def _values(evaluation: Any) -> dict[str, Any]:
    return {k: v.value for k, v in evaluation.metadata.items()}


def test_verify_depth_defaults_to_sample_and_rejects_an_unknown_depth(tmp_path: Path) -> None:
    url = "postgresql://rivet@127.0.0.1:1/shopdb"
    config = load_config(chunked_config(Target("local", tmp_path), url))
    assert config.export(EXPORT).dagster is None or config.export(EXPORT).dagster.verify_depth == "sample"
    (tmp_path / "f").mkdir()
    full = load_config(chunked_config(Target("local", tmp_path / "f"), url, verify_depth="full"))
    assert full.export(EXPORT).dagster.verify_depth == "full"
    (tmp_path / "bad").mkdir()
    try:
        load_config(chunked_config(Target("local", tmp_path / "bad"), url, verify_depth="deep"))
    except Exception as exc:  # noqa: BLE001 - the config error's message is the contract
        assert "verify_depth" in str(exc) and "light, sample, full" in str(exc)
    else:
        raise AssertionError("verify_depth: deep was accepted")


def test_chunk_partitions_carry_fingerprints_and_a_full_check_catches_a_flipped_byte(
        orders_550: str, tmp_path: Path, instance: dg.DagsterInstance) -> None:  # noqa: F811
    target = Target("local", tmp_path)
    defs = build_definitions(chunked_config(target, orders_550, verify_depth="full"))
    manifest_key = dg.AssetKey(f"{EXPORT}_manifest")
    defs = with_jobs(defs, check_only_job("verify_only", manifest_key))
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    result = run_job(defs, MANIFEST_JOB, instance)
    assert result.success
    check = check_evaluations(result)["manifest_verified"]
    assert check.passed, _values(check)

    view = target.view(EXPORT)
    manifest = view.current_manifest()
    assert manifest["checksum_render"] == "xxh3-64-sum-v2" and manifest["column_checksums"]
    for part in manifest["parts"]:
        assert part["content_fingerprint"].startswith("xxh3:") and part["content_md5"], part
        assert {c["name"] for c in part["column_checksums"]} >= {"id", "amount"}, part

    victim = manifest["parts"][2]["path"]
    path = tmp_path / "out" / EXPORT / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    checked = run_job(defs, "verify_only", instance)
    evaluation = check_evaluations(checked)["manifest_verified"]
    assert not checked.success and not evaluation.passed
    table = _values(evaluation)["failure_table"]
    assert f"`{victim}`" in table and "part_content_mismatch (content_fingerprint)" in table
    assert manifest["parts"][2]["content_fingerprint"] in table


def test_a_dagster_written_chunked_manifest_fingerprints_every_part_and_rivet_validate_full_passes(
        orders_550: str, target: Target, instance: dg.DagsterInstance) -> None:  # noqa: F811
    """Issue 15 item 8: every part of every manifest has its fingerprints, whoever wrote it —
    here the Dagster chunk finalize, whose parts come from file_log (written by other runs)
    and, after one window is re-materialized, partly from the previous chunk run (carried).
    The CLI's `rivet validate --depth full` re-reads them all; `data/` holds exactly the
    manifest's parts (the superseded window part was moved aside) and equals the source."""
    import json

    import pyarrow.dataset as ds

    from rivet_core.pipeline.facade.chunk_commit import is_own_part
    from tests.dagster.support import id_amounts, source_rows
    from tests.helpers import db_exec
    from tests.helpers import rivet_quick as rivet

    config = chunked_config(target, orders_550)
    defs = build_definitions(config)
    tick(defs, instance)
    assert materialize(defs, instance, INITIAL_KEYS[0], INITIAL_KEYS[-1]).success
    assert run_job(defs, MANIFEST_JOB, instance).success
    db_exec(orders_550, "UPDATE orders SET amount = amount + 1 WHERE id BETWEEN 100 AND 199")
    assert materialize(defs, instance, INITIAL_KEYS[1]).success
    assert run_job(defs, MANIFEST_JOB, instance).success

    view = target.view(EXPORT)
    manifest = view.current_manifest()
    parts = manifest["parts"]
    assert len(parts) == 6 and all(p["path"].startswith("data/") for p in parts)
    carried = [p for p in parts if not is_own_part(p["path"], EXPORT, manifest["run_id"])]
    assert len(carried) == 5  # written by the first chunk run, listed again by this one
    for part in parts:
        assert part["content_fingerprint"].startswith("xxh3:") and len(part["content_fingerprint"]) == 21, part
        assert part["content_md5"] and part["column_checksums"], part
    assert manifest["checksum_render"] == "xxh3-64-sum-v2" and manifest["column_checksums"]

    checked = rivet("validate", "-c", str(config), "--depth", "full", "--format", "json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    verification = json.loads(checked.stdout)["exports"][0]["verification"]
    assert verification["passed"] and verification["parts_content_verified"] == 6, verification
    assert verification["column_checksums"] == "verified" and not verification["failures"], verification

    assert view.data_keys() == sorted(p["path"] for p in parts)
    if target.kind == "local":
        table = ds.dataset(str(target.tmp / "out" / EXPORT / "data"), format="parquet").to_table()
        assert id_amounts(table) == source_rows(orders_550)
