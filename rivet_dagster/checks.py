"""`manifest_verified`: the blocking asset check that re-verifies the destination.

It calls the core's `verify_at_destination` — the same function as `rivet validate` — on
the export's prefix (for a daily export: the partition of this run, or every partition
prefix that has a manifest when run on its own). It reads only the destination, never
the asset value. A failure is ERROR and blocking: the run fails and downstream assets do
not run. The metadata (rivet_dagster/metadata.py) leads with the verdict and counts, then
a table of failures: file, problem, expected, found.

No `from __future__ import annotations` here (Dagster resolves resource annotations).
"""


from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.metadata import verification_metadata
from rivet_dagster.naming import asset_key
from rivet_dagster.partitions import export_partitions, run_partition_keys, sub_prefix_for_key
from rivet_dagster.store_clients import required_keys, with_store_clients

partition_prefixes = api.partition_prefixes


_REREAD_KINDS = ("part_content_mismatch", "part_row_count_mismatch", "value_checksum_mismatch")


def failure_row(prefix: str, failure: dict[str, Any]) -> dict[str, Any]:
    """One verifier finding as a row of the failure table: the file (prefix-relative to the
    export root), the problem, and what the manifest expected vs what the destination holds."""
    kind = failure["kind"]
    path = failure.get("path") or failure.get("key") or ""
    if kind in ("success_marker_stale", "success_marker_malformed", "success_marker_read_error"):
        path = path or "_SUCCESS"
    elif kind.startswith("manifest_"):
        path = path or "manifest.json"
    if kind == "part_missing":
        expected, found = "present", "missing"
    elif kind == "success_marker_stale":
        expected, found = failure.get("manifest_fingerprint", ""), failure.get("marker_fingerprint", "")
    elif "expected" in failure or "actual" in failure:
        expected, found = failure.get("expected", ""), failure.get("actual", "")
    else:
        expected, found = "", failure.get("detail", failure.get("body_preview", ""))
    if failure.get("check") and kind in _REREAD_KINDS:  # depth full: which check (content_fingerprint, rows, a column)
        kind = f"{kind} ({failure['check']})"
    return {"file": (prefix or "") + path if path else prefix, "problem": kind,
            "expected": expected, "found": found}


def verify_depth(export: api.ExportConfig) -> str:
    """`exports[].dagster.verify_depth` (default `sample`: no part is downloaded)."""
    return export.dagster.verify_depth if export.dagster else "sample"


def bucket_set_rows(verdict: Any) -> list[dict[str, Any]]:
    """A `partition_by` export's bucket-set findings (api.verify_bucket_set) as failure rows:
    the bucket folder, and whether `_partitions.json` records it."""
    rows = []
    for f in verdict.to_dict()["failures"]:
        missing = f["kind"] == "bucket_missing"
        rows.append({"file": f"{f['bucket']}/" if "bucket" in f else f.get("key", "_partitions.json"),
                     "problem": f["kind"], "expected": "present" if missing else "recorded",
                     "found": "missing" if missing else "unrecorded" if "bucket" in f else f.get("detail", "")})
    return rows


def verify_prefixes(config: api.RivetConfig, export: api.ExportConfig, prefixes: list[str],
                    bucket_set: Any = None) -> dg.AssetCheckResult:
    """The verdict over `prefixes` (the export root is `""`), as one check result; with
    `bucket_set` (a `partition_by` export's set verdict), its findings first."""
    failures: list[dict[str, Any]] = []
    verified = md5_verified = advisory = 0
    passed = bool(prefixes)
    if bucket_set is not None and not bucket_set.legacy_run:
        failures += bucket_set_rows(bucket_set)
        passed = bucket_set.passed and (passed or not bucket_set.failures)
    for prefix in prefixes:
        _, verdict = api.verify_export(config, export.name, sub_prefix=prefix, depth=verify_depth(export))
        verified += verdict.parts_verified
        md5_verified += verdict.parts_md5_verified
        if not verdict.passed:
            passed = False
        if verdict.legacy_run:
            failures.append({"file": prefix + "manifest.json", "problem": "no_manifest",
                             "expected": "present", "found": "missing"})
        for f in verdict.to_dict()["failures"]:
            if f["kind"] == "untracked_object":
                advisory += 1
                continue
            failures.append(failure_row(prefix, f))
    description = ("every part listed by the manifest is present at its recorded size; _SUCCESS matches"
                   if passed else f"{len(failures)} verification failure(s): "
                   + ", ".join(f"{r['problem']} `{r['file']}`" for r in failures[:3])
                   + (" …" if len(failures) > 3 else "") if prefixes or failures else
                   "nothing to verify: no manifest at the destination yet")
    return dg.AssetCheckResult(
        passed=passed, severity=dg.AssetCheckSeverity.ERROR, description=description,
        metadata=verification_metadata(passed=passed, prefixes=len(prefixes), parts_verified=verified,
                                       parts_md5_verified=md5_verified, failures=failures, untracked=advisory))


def build_manifest_check(config: api.RivetConfig, export: api.ExportConfig,
                         key: dg.AssetKey | None = None) -> dg.AssetChecksDefinition:
    """`manifest_verified` on the export's asset, or on `key` (a chunked export's
    `<export>_manifest` asset, which owns the prefix's one manifest)."""
    export_name = export.name
    config_path = str(config.config_path)
    partitioned = export.mode == "time_window"
    partitions_def = export_partitions(config, export) if partitioned else None

    @dg.asset_check(asset=key or asset_key(config, export), name="manifest_verified", blocking=True,
                    required_resource_keys=required_keys(export),
                    description="Verify the destination against manifest.json and _SUCCESS "
                                "(same verdicts as `rivet validate`).")
    @with_store_clients(export)
    def _manifest_verified(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        cfg = api.load_config(config_path)
        exp = cfg.export(export_name)
        if exp.partition_by:  # the bucket set, then every bucket prefix (rivet_core/pipeline/buckets/run.py)
            prefixes = api.bucket_prefixes(cfg, exp)
            return verify_prefixes(cfg, exp, prefixes, api.verify_bucket_set(cfg, exp, prefixes)[1])
        if not partitioned:
            return verify_prefixes(cfg, exp, [""])
        # The run's partition, or every partition of its range (a backfill policy); alone
        # (Checks tab → Execute), every partition prefix that has a manifest.
        keys = run_partition_keys(partitions_def, dict(context.run.tags))
        prefixes = [sub_prefix_for_key(exp, k) for k in keys] if keys else partition_prefixes(cfg, exp)
        return verify_prefixes(cfg, exp, prefixes)

    return _manifest_verified
