"""`manifest_verified`: the blocking asset check that re-verifies the destination.

It calls the core's `verify_at_destination` — the same function as `rivet validate` — on
the export's prefix (for a daily export: the partition of this run, or every partition
prefix that has a manifest when run on its own). It reads only the destination, never
the asset value. A failure is ERROR and blocking: the run fails and downstream assets do
not run; the metadata lists each failure with its part, expected and actual values.

No `from __future__ import annotations` here (Dagster resolves resource annotations).
"""


import dagster as dg

from rivet_core import api
from rivet_dagster.naming import asset_key
from rivet_dagster.partitions import sub_prefix_for_key
from rivet_dagster.resources import RivetResource

partition_prefixes = api.partition_prefixes


def failures_markdown(rows: list[dict]) -> str:
    if not rows:
        return "No failures."
    lines = ["| prefix | failure | part | expected | actual |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['prefix']}` | {r['kind']} | `{r.get('path', '')}` | {r.get('expected', '')} "
                     f"| {r.get('actual', '')} |")
    return "\n".join(lines)


def verify_prefixes(config: api.RivetConfig, export: api.ExportConfig, prefixes: list[str]) -> dg.AssetCheckResult:
    failures: list[dict] = []
    verified = advisory = 0
    passed = bool(prefixes)
    for prefix in prefixes:
        _, verdict = api.verify_export(config, export.name, sub_prefix=prefix)
        verified += verdict.parts_verified
        if not verdict.passed:
            passed = False
        if verdict.legacy_run:
            failures.append({"prefix": prefix or "/", "kind": "no_manifest"})
        for f in verdict.to_dict()["failures"]:
            if f["kind"] == "untracked_object":
                advisory += 1
                continue
            missing = f["kind"] == "part_missing"
            failures.append({"prefix": prefix or "/", "kind": f["kind"],
                             "path": f.get("path") or f.get("key") or "",
                             "expected": "present" if missing else f.get("expected", f.get("manifest_fingerprint", "")),
                             "actual": "missing" if missing else f.get("actual", f.get("marker_fingerprint", ""))})
    description = ("every part listed by the manifest is present at its recorded size; _SUCCESS matches"
                   if passed else f"{len(failures)} verification failure(s)" if prefixes else
                   "nothing to verify: no manifest at the destination yet")
    return dg.AssetCheckResult(
        passed=passed, severity=dg.AssetCheckSeverity.ERROR, description=description,
        metadata={"prefixes_checked": len(prefixes), "parts_verified": verified,
                  "failures": len(failures), "untracked_objects": advisory,
                  "failure_table": dg.MetadataValue.md(failures_markdown(failures))})


def build_manifest_check(config: api.RivetConfig, export: api.ExportConfig,
                         key: dg.AssetKey | None = None) -> dg.AssetChecksDefinition:
    """`manifest_verified` on the export's asset, or on `key` (a chunked export's
    `<export>_manifest` asset, which owns the prefix's one manifest)."""
    export_name = export.name
    partitioned = export.mode == "time_window"

    @dg.asset_check(asset=key or asset_key(config, export), name="manifest_verified", blocking=True,
                    description="Verify the destination against manifest.json and _SUCCESS "
                                "(same verdicts as `rivet validate`).")
    def _manifest_verified(context: dg.AssetCheckExecutionContext, rivet: RivetResource) -> dg.AssetCheckResult:
        cfg = rivet.load()
        exp = cfg.export(export_name)
        if not partitioned:
            return verify_prefixes(cfg, exp, [""])
        key = context.run.tags.get("dagster/partition")
        prefixes = [sub_prefix_for_key(exp, key)] if key else partition_prefixes(cfg, exp)
        return verify_prefixes(cfg, exp, prefixes)

    return _manifest_verified
