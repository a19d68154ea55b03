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
    assert manifest["checksum_render"] == "rivet-colsum-v1" and manifest["column_checksums"]
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
