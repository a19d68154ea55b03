"""The `dagster:` blocks of `rivet.yaml`: their models, their checks and their `rivet init` lines.

`exports[].dagster` holds one export's Dagster settings (schedule or automation, partitions,
freshness, resources, pools…) and the top-level `dagster:` the defaults every export shares.
The core config knows neither: this module describes them as a `ConfigBlock` (BLOCK),
registered under the `rivet.config_blocks` entry point in pyproject.toml, so the core's config
loader validates the block — and `rivet validate` reports its errors — without importing
Dagster. Keep this module as light as the loader: pydantic and the core's config block
surface only (rivet_core/config/blocks.py), never `dagster` (the package's `__init__` loads
its public names lazily for that reason).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from rivet_core.config.blocks import BlockModel, ConfigBlock, register_config_block
from rivet_core.config.scalars import Str, scalar_to_str

#: Dagster names (asset key segments, groups): letters, digits and underscores.
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def _key_prefix_shape(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        parts = [value]
    elif isinstance(value, list) and value:
        parts = [scalar_to_str(v) for v in value]
    else:
        raise ValueError("must be a string or a non-empty list of strings")
    for part in parts:
        if not isinstance(part, str) or not _NAME.match(part):
            raise ValueError(
                f"key_prefix segment {part!r} is not a valid Dagster name — use letters, "
                "digits and underscores only"
            )
    return value


def _check_dagster_name(value: str | None, what: str) -> str | None:
    if value is not None and not _NAME.match(value):
        raise ValueError(
            f"{what} '{value}' is not a valid Dagster name — use letters, digits and "
            "underscores only"
        )
    return value


def _check_date(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"'{value}' is not a date — use YYYY-MM-DD, e.g. 2024-01-01") from exc
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError(f"'{value}' is not a date — use YYYY-MM-DD, e.g. 2024-01-01")
    return value


class _DagsterCommon(BlockModel):
    """The fields the top-level `dagster:` defaults and each export's `dagster:` share."""


    group: Str | None = None
    key_prefix: Annotated[str | list[str] | None, BeforeValidator(_key_prefix_shape)] = None
    pool: Str | None = None
    schedule_status: Literal["RUNNING", "STOPPED"] | None = None
    #: The chunk planner sensor's default status: RUNNING unless set STOPPED here — a chunked
    #: export does nothing until its planner runs (rivet_dagster/chunked.py `_sensor_status`).
    planner_status: Literal["RUNNING", "STOPPED"] | None = None
    start_date: Str | None = None

    @field_validator("group")
    @classmethod
    def _group_name(cls, value: str | None) -> str | None:
        return _check_dagster_name(value, "group")

    @field_validator("start_date")
    @classmethod
    def _start(cls, value: str | None) -> str | None:
        return _check_date(value)

    @property
    def key_prefix_list(self) -> list[str]:
        """`key_prefix` as a list of path segments (empty when unset)."""
        if self.key_prefix is None:
            return []
        return [self.key_prefix] if isinstance(self.key_prefix, str) else list(self.key_prefix)


class DagsterDefaults(_DagsterCommon):
    """Top-level `dagster:` — defaults for every export's `dagster:` block."""

    #: `none` (default): no job per export — schedules, the chunk planner and backfills
    #: launch the export's assets by selection on Dagster's implicit asset job, so a code
    #: location's load time stays linear in its exports (issue 34). `per_export`: also an
    #: `<export>_job` per export (and `_manifest_job`, `_publish_job`, `_reconcile_job` per
    #: chunked export), for `dagster job launch` and jobs named in the UI — each job costs
    #: Dagster a resolution and a snapshot of its own (rivet_dagster/factory.py).
    jobs: Literal["none", "per_export"] = "none"
    #: The unpartitioned (full, incremental) exports as one subsettable multi-asset: the
    #: selected ones run in one step (rivet_dagster/multi_asset.py). `false`: one asset each.
    multi_asset: bool | None = None
    #: How many exports of the multi-asset's step run at once (threads of the step, each with
    #: its own source connection); unset: 1, one after the other as `rivet run` does.
    multi_asset_parallel: int | None = Field(default=None, ge=1, le=64)


class AutomationOnCron(BlockModel):
    """`automation_condition: {on_cron: "<cron>"}` — materialize once per cron tick, after
    the asset's dependencies have updated since the tick."""

    on_cron: Str

    @field_validator("on_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        return _check_cron(value, "automation_condition.on_cron")


class FreshnessConfig(BlockModel):
    """`dagster.freshness` — the asset is stale (warn, then fail) when its last
    materialization is older than this many minutes."""

    fail_after_minutes: int = Field(ge=1, le=525_600)
    warn_after_minutes: int | None = Field(default=None, ge=1, le=525_600)

    @model_validator(mode="after")
    def _order(self) -> FreshnessConfig:
        if self.warn_after_minutes is not None and self.warn_after_minutes >= self.fail_after_minutes:
            raise ValueError("freshness.warn_after_minutes must be less than fail_after_minutes")
        return self


def _check_cron(value: str, what: str) -> str:
    fields = value.split()
    if not (len(fields) == 5 or (len(fields) == 1 and value.startswith("@"))):
        raise ValueError(
            f"{what} '{value}' is not a cron expression — use five fields, "
            "e.g. '0 3 * * *' (daily at 03:00), or @hourly/@daily/@weekly/@monthly"
        )
    return value


class ExportDagsterConfig(_DagsterCommon):
    """`exports[].dagster` — Dagster-only settings for one export's asset."""

    #: Declarative automation instead of (not beside) `schedule`: `eager` (whenever the
    #: source table asset updates, or the asset is missing), `on_missing` (once, when never
    #: materialized), or `{on_cron: "<cron>"}`. Evaluated by Dagster's automation sensor.
    automation_condition: Literal["eager", "on_missing"] | AutomationOnCron | None = None
    freshness: FreshnessConfig | None = None
    #: Chunked exports: `false` runs the whole checkpointed chunked run as one unpartitioned
    #: asset (as `chunk_count`/`chunk_dense`/`keyset_incremental` exports always do) instead
    #: of one partition per window.
    chunk_partitions: bool = True
    #: S3 destinations: the Dagster resource key of a `dagster_aws.s3.S3Resource` the
    #: export's client comes from (default: one built from this destination's fields).
    s3_resource_key: Str | None = None
    #: GCS destinations: the key of a dagster-gcp `GCSResource` (or any resource whose
    #: `get_client()` gives a `google.cloud.storage.Client`) the client comes from.
    gcs_resource_key: Str | None = None
    #: Azure destinations: the key of a dagster-azure `AzureBlobStorageResource` or
    #: `ADLS2Resource` (a `BlobServiceClient`) the client comes from.
    azure_resource_key: Str | None = None
    #: Depth of the `manifest_verified` asset check (rivet_core/manifest/verify.py):
    #: `light` (listing: presence, size, `_SUCCESS`), `sample` (+ listing MD5, untracked
    #: objects), `full` (+ every part downloaded and re-read: content hash, row count,
    #: per-column checksums).
    verify_depth: Literal["light", "sample", "full"] = "sample"

    schedule: Str | None = None
    end_date: Str | None = None
    timezone: Str | None = None
    #: time_window exports: the partitions' granularity (keys and sub-prefixes in
    #: docs/dagster-guide.md#time-partitions); boundaries are in `timezone` (default UTC).
    partitions: Literal["hourly", "daily", "weekly", "monthly"] = "daily"
    #: Chunked exports: how a backfill of many chunk partitions is split into runs.
    #: `multi_run` (default): up to `max_partitions_per_run` windows per run, runs in parallel
    #: (pool-limited). `single_run`: one run for a whole range — required by
    #: `dagster asset materialize --partition-range` (a Dagster 1.13 rule).
    backfill_policy: Literal["multi_run", "single_run"] = "multi_run"
    #: Windows (chunked) or time partitions per run of a `multi_run` backfill. The chunked
    #: planner sensor: unset, it makes as few runs as may export at once (`parallel` runs, at
    #: most the source pool's limit: rivet_dagster/chunked.py `windows_per_run`); set, runs of
    #: up to this many consecutive windows.
    max_partitions_per_run: int = Field(default=10, ge=1)
    #: Chunked exports: at most this many runs per planner tick (each a range of
    #: consecutive windows); the rest wait in the planner's backlog for the next
    #: ticks, so a table of thousands of windows never floods the run queue at once.
    max_runs_per_tick: int = Field(default=20, ge=1)
    #: Chunked exports: a cron; on each tick the planner re-exports every window (the way to
    #: stay true to the source without a `change_column`, whose in-place updates are unseen).
    refresh: Str | None = None

    @field_validator("refresh")
    @classmethod
    def _refresh_cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        fields = value.split()
        if not (len(fields) == 5 or (len(fields) == 1 and value.startswith("@"))):
            raise ValueError(
                f"refresh '{value}' is not a cron expression — use five fields, e.g. "
                "'0 2 * * 0' (Sundays at 02:00), or @hourly/@daily/@weekly/@monthly"
            )
        return value

    @field_validator("end_date")
    @classmethod
    def _end(cls, value: str | None) -> str | None:
        return _check_date(value)

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        fields = value.split()
        if not (len(fields) == 5 or (len(fields) == 1 and value.startswith("@"))):
            raise ValueError(
                f"schedule '{value}' is not a cron expression — use five fields, "
                "e.g. '0 3 * * *' (daily at 03:00), or @hourly/@daily/@weekly/@monthly"
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"timezone '{value}' is not an IANA time zone — use e.g. 'UTC' or 'Europe/Berlin'"
            ) from exc
        return value

    @model_validator(mode="after")
    def _one_trigger(self) -> ExportDagsterConfig:
        if self.schedule and self.automation_condition is not None:
            raise ValueError(
                "schedule and automation_condition both set — pick one: a cron `schedule` "
                "(a schedule definition) or an `automation_condition` (evaluated by Dagster's "
                "automation sensor)")
        return self


def check_export(export: Any, block: ExportDagsterConfig | None, label: str) -> list[str]:
    """The rules of `exports[].dagster` that need the export around it (run by the core's
    validation with every other cross-field rule, rivet_core/config/validate.py)."""
    errors: list[str] = []
    if block and block.start_date and block.end_date and block.end_date <= block.start_date:
        errors.append(
            f"{label}: dagster.end_date ({block.end_date}) must be after dagster.start_date "
            f"({block.start_date})"
        )
    if block and block.refresh and export.mode != "chunked":
        errors.append(
            f"{label}: dagster.refresh re-exports the windows of a chunked export (mode is "
            f"{export.mode}) — remove it, or use dagster.schedule to re-run this export"
        )
    return errors


def scaffold_defaults(schema: str) -> list[str]:
    """`rivet init`: the top-level `dagster:` block — one asset group named after the schema."""
    group = re.sub(r"[^A-Za-z0-9_]", "_", schema) or "rivet"
    return ["dagster:", f"  group: {group}   # schedules below stay STOPPED until schedule_status: RUNNING"]


def scaffold_export(cron: str) -> list[str]:
    """`rivet init`: a scheduled export's `dagster:` block (`cron` is already YAML-quoted)."""
    return ["dagster:", f"  schedule: {cron}"]


#: The block, as the core's config loader knows it (entry point `rivet.config_blocks: dagster`).
def doctor_checks(config: Any) -> list[tuple[str, bool, str, str | None]]:
    """`rivet doctor`: the Dagster instance has the settings rivet's recoveries need
    (instance_settings.py; imported here only when doctor runs, so a config load stays light)."""
    from rivet_dagster.instance_settings import doctor_checks as check_instance

    return check_instance(config)


BLOCK = ConfigBlock(
    name="dagster", export_model=ExportDagsterConfig, defaults_model=DagsterDefaults,
    check_export=check_export, scaffold_defaults=scaffold_defaults, scaffold_export=scaffold_export,
    package="rivet-dagster", doctor_checks=doctor_checks,
)
register_config_block(BLOCK)  # known even where the package metadata (entry points) is not installed


def own_block(export: Any) -> ExportDagsterConfig | None:
    """`exports[].dagster` of a loaded export (None when absent)."""
    return export.integration("dagster")  # type: ignore[no-any-return]


def defaults_block(config: Any) -> DagsterDefaults | None:
    """The top-level `dagster:` of a loaded config (None when absent)."""
    return config.integration("dagster")  # type: ignore[no-any-return]


__all__ = ["BLOCK", "AutomationOnCron", "DagsterDefaults", "ExportDagsterConfig", "FreshnessConfig",
           "check_export", "defaults_block", "own_block", "scaffold_defaults", "scaffold_export"]
