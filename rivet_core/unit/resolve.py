"""Resolve an export into one export unit (`ResolvedUnit`): SQL, params, destination, options.

An *export unit* is what publishes one manifest: a whole `full` or `incremental` export,
a `time_window` export, one day of a time-partitioned export (an orchestrator passes
that day as `window`), or a whole chunked run (whose windows are laid out separately by
`rivet_core.chunks`). Resolving is pure apart from reading the stored cursor, so an
orchestrator and the CLI resolve exports identically. (The word "plan" belongs to
`rivet plan` / `rivet apply`, rivet_core/ops/plan.py.)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from rivet_core.config import ExportConfig, RivetConfig, render_destination
from rivet_core.config.source_url import SQLALCHEMY_PREFIX
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.destination import Destination, DestinationSpec, open_destination
from rivet_core.errors import ConfigError
from rivet_core.format import WriterOptions
from rivet_core.format.base import DEFAULT_ROW_GROUP_ROWS
from rivet_core.lazy_modules import pa
from rivet_core.manifest.column_checksums import checksum_key_column
from rivet_core.source import (
    build_incremental_query,
    build_time_range_query,
    build_time_window_query,
    engine_of,
)
from rivet_core.source.query import Dialect, dialect_for


@dataclass(frozen=True)
class DayWindow:
    """A half-open time range [start, end) of one time partition (an hour, day, week, month).

    `start`/`end` are dates (UTC midnights: the original daily form) or zone-aware
    datetimes in any zone — the bounds are the UTC instants they denote (`utc_bounds`), so
    a New York day is [05:00Z, 05:00Z) and a DST day is 23 or 25 hours long. `key` is the
    partition's path-safe label (`[A-Za-z0-9_.-]`): it names the sub-prefix
    `<time_column>=<key>/` and the partition's lock; default: the start date.
    """

    start: date | datetime
    end: date | datetime
    key: str | None = None

    def __post_init__(self) -> None:
        for bound in (self.start, self.end):
            if isinstance(bound, datetime) and bound.tzinfo is None:
                raise ValueError("a time window bound must be a date or a zone-aware datetime")
        if self.key is not None and not _WINDOW_KEY.fullmatch(self.key):
            raise ValueError(f"time window key '{self.key}' is not path-safe (letters, digits, _ . -)")
        if self.utc_bounds[0] >= self.utc_bounds[1]:
            raise ValueError(f"empty time window [{self.start}, {self.end})")

    @property
    def label(self) -> str:
        if self.key is not None:
            return self.key
        start = self.start.date() if isinstance(self.start, datetime) else self.start
        return start.isoformat()

    @property
    def utc_bounds(self) -> tuple[datetime, datetime]:
        """[start, end) as UTC instants."""
        return _utc(self.start), _utc(self.end)

    @property
    def local_dates(self) -> tuple[date, date]:
        """[start, end) as calendar dates in the window's own zone (what a DATE column holds)."""
        return (self.start.date() if isinstance(self.start, datetime) else self.start,
                self.end.date() if isinstance(self.end, datetime) else self.end)


TimeWindow = DayWindow  # the general name; DayWindow stays for the daily form's callers
_WINDOW_KEY = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")


def _utc(bound: date | datetime) -> datetime:
    if isinstance(bound, datetime):
        return bound.astimezone(UTC)
    return datetime(bound.year, bound.month, bound.day, tzinfo=UTC)


@dataclass
class ResolvedUnit:
    """One export unit resolved from the config: what a runner executes and publishes."""

    export: ExportConfig
    engine: str
    source_url: str
    tuning: ResolvedTuning
    strategy: str
    sql: str
    params: list[Any]
    cursor_column: str | None
    cursor_low: str | None
    #: Synthetic columns the runner strips before writing (coalesce cursor).
    strip_columns: tuple[str, ...]
    overrides: dict[str, pa.DataType]
    table_hint: tuple[str | None, str] | None
    dest_spec: DestinationSpec
    writer_options: WriterOptions
    max_file_size: int | None
    window: DayWindow | None = None
    warnings: list[str] = field(default_factory=list)
    #: `mode: time_window` (days_window) runs: the UTC cutoff the query starts at (the
    #: manifest's `window_start`; the window is open-ended, so there is no `window_end`).
    time_window_start: datetime | None = None
    #: `--full-refresh`: every row is exported again, so a table export commits an overwrite
    #: (a new baseline, tableformat/chain.py) whatever its mode (tableformat/commit.py `operation_for`).
    full_refresh: bool = False

    @property
    def base_query(self) -> str:
        return self.export.resolved_query


def _engine_of(url: str) -> str:
    if url.startswith(SQLALCHEMY_PREFIX):
        return engine_of(url)  # `sqlalchemy:<backend>`: the generic source
    scheme = url.split(":", 1)[0]
    if scheme.startswith("postgres"):
        return "postgres"
    if scheme.startswith("mysql") or scheme.startswith("mariadb"):
        return "mysql"
    if scheme.startswith("sqlite"):
        return "sqlite"
    raise ConfigError(f"unsupported source URL scheme '{scheme}' — use postgresql://, mysql:// or sqlite:///")


def _env(name: str | None, what: str, export_name: str) -> str | None:
    if not name:
        return None
    value = os.environ.get(name)
    if value is None:
        raise ConfigError(f"export '{export_name}': env var '{name}' is not set (referenced by {what}) "
                          f"— export {name}=...")
    return value


def destination_spec(config: RivetConfig, export: ExportConfig, now: datetime,
                     sub_prefix: str = "") -> DestinationSpec:
    """The resolved destination of an export (templated, credentials read from env)."""
    dest = render_destination(export.destination, export.name, now)
    if dest.type == "local":
        base = dest.path or dest.prefix or "."
        path = os.path.join(base, sub_prefix) if sub_prefix else base
        return DestinationSpec(kind="local", path=path)
    if dest.type == "s3":
        prefix = dest.prefix or ""
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return DestinationSpec(
            kind="s3", bucket=dest.bucket, prefix=prefix + sub_prefix, region=dest.region,
            endpoint=dest.endpoint,
            access_key=_env(dest.access_key_env, "access_key_env", export.name),
            secret_key=_env(dest.secret_key_env, "secret_key_env", export.name),
            session_token=_env(dest.session_token_env, "session_token_env", export.name),
            aws_profile=dest.aws_profile, timeout_s=dest.timeout_s, max_attempts=dest.max_attempts)
    if dest.type in ("gcs", "azure"):
        return _cloud_spec(config, export, dest, sub_prefix)
    return DestinationSpec(kind="stdout")


def _cloud_spec(config: RivetConfig, export: ExportConfig, dest: Any, sub_prefix: str) -> DestinationSpec:
    """GCS / Azure: the prefix as for S3, the credential read from its env var now (so an
    unset variable is named before anything runs), a relative credentials_file resolved
    against the config file's directory."""
    prefix = dest.prefix or ""
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    credentials_file = dest.credentials_file
    if credentials_file and not os.path.isabs(os.path.expanduser(credentials_file)):
        credentials_file = str(config.config_dir / credentials_file)
    return DestinationSpec(
        kind=dest.type, bucket=dest.bucket, prefix=prefix + sub_prefix, endpoint=dest.endpoint,
        credentials_file=credentials_file, account_name=dest.account_name,
        account_key=_env(dest.account_key_env, "account_key_env", export.name),
        sas_token=_env(dest.sas_token_env, "sas_token_env", export.name),
        allow_anonymous=dest.allow_anonymous, timeout_s=dest.timeout_s, max_attempts=dest.max_attempts,
        credential_env=dest.account_key_env or dest.sas_token_env)


# export_destination / partition_prefixes live here (re-exported by rivet_core.api) so that
# `rivet validate` opens a destination without importing the whole engine behind api.py.
def export_destination(config: RivetConfig, export: ExportConfig, *, sub_prefix: str = "",
                       now: datetime | None = None, create: bool = True) -> Destination:
    """Open the destination prefix an export writes to (templated at `now`). `create=False`:
    read-only inspection (validate, checks) never creates a missing local directory."""
    spec = destination_spec(config, export, now or datetime.now(UTC), sub_prefix)
    return open_destination(spec, config.config_dir, create=create)


def partition_prefixes(config: RivetConfig, export: ExportConfig) -> list[str]:
    """Every `<time_column>=<key>/` prefix under a time_window export that holds a manifest
    (the time partitions an orchestrator wrote: `YYYY-MM-DD` for daily, weekly and monthly
    partitions, `YYYY-MM-DD-HHMM[±HHMM]` for hourly ones, `+` spelled `p`); [] for other exports."""
    if export.mode != "time_window" or not export.time_column:
        return []
    day = re.compile(r"^\d{4}-\d{2}-\d{2}(-\d{4}([-p]\d{4})?)?$")
    marker = f"{export.time_column}="
    found = set()
    for obj in export_destination(config, export, create=False).list(""):
        head, _, rest = obj.key.partition("/")
        if head.startswith(marker) and rest == "manifest.json" and day.match(head[len(marker):]):
            found.add(head + "/")
    return sorted(found)


def is_calendar_column(export: ExportConfig, schema: pa.Schema) -> bool:
    """Is the export's time column a DATE (calendar days, no instant) in `schema`?"""
    if not export.time_column or (export.time_column_type or "timestamp") != "timestamp":
        return False
    index = schema.get_field_index(export.time_column)
    return index >= 0 and pa.types.is_date(schema.field(index).type)


def calendar_window_params(plan: ResolvedUnit, schema: pa.Schema) -> list[Any] | None:
    """A time partition on a DATE column compares it with the window's local dates (the
    New York day 2024-01-02 holds the rows dated 2024-01-02), not with its UTC instants cut
    to a date; a `days_window` run on a DATE column with the cutoff's date, not its midnight
    instant — SQLite keeps a DATE as text, where '2024-01-02' < '2024-01-02 00:00:00' would
    drop the cutoff day itself. None for any other column or plan (described `schema`
    decides)."""
    if not is_calendar_column(plan.export, schema):
        return None
    if plan.window is None:
        if plan.time_window_start is None:
            return None
        return [plan.time_window_start.date()]
    start, end = plan.window.local_dates
    _, params = build_time_range_query(dialect_for(plan.engine), plan.base_query, plan.export.time_column or "",
                                       start, end, "timestamp")
    return params


def writer_options(export: ExportConfig) -> WriterOptions:
    codec, level = export.effective_compression()
    pq = export.parquet
    # No `parquet:` block: Rivet's library default of 1,048,576 rows per group, never more
    # than the 128 MB memory estimate allows (format.base.WriterOptions.row_group_row_cap).
    kwargs: dict[str, Any] = {"row_group_row_cap": DEFAULT_ROW_GROUP_ROWS}
    if pq is not None:
        kwargs = dict(row_group_strategy=pq.row_group_strategy or "auto",
                      row_group_rows=pq.row_group_rows,
                      target_row_group_mb=pq.target_row_group_mb or 128,
                      max_row_group_mb=pq.max_row_group_mb)
    return WriterOptions(format=export.format, compression=codec, compression_level=level,
                         checksum_key_column=checksum_key_column(export), **kwargs)


def time_window_cutoff(days_window: int, now: datetime) -> datetime:
    """(UTC now − days_window days) truncated to UTC midnight (docs/rivet-compat.md "Time window")."""
    start = (now.astimezone(UTC) - timedelta(days=days_window)).date()
    return datetime(start.year, start.month, start.day, tzinfo=UTC)


def resolve_unit(
    config: RivetConfig, export: ExportConfig, *, stored_cursor: str | None,
    now: datetime | None = None, window: DayWindow | None = None,
) -> ResolvedUnit:
    """Resolve one export unit (see module docstring)."""
    now = now or datetime.now(UTC)
    if export.mode not in ("full", "incremental", "time_window", "chunked", "cdc"):
        raise ConfigError(f"export '{export.name}': mode '{export.mode}' is not supported yet "
                          "— use full, incremental or time_window")
    url = config.source.resolve_url(config.config_dir)
    engine = _engine_of(url)
    dialect: Dialect = dialect_for(engine)
    base = export.resolved_query
    strip: tuple[str, ...] = ()
    cursor_column: str | None = None
    cursor_low: str | None = None
    params: list[Any] = []
    sub_prefix = ""
    time_window_start: datetime | None = None
    if window is not None:
        if not export.time_column:
            raise ConfigError(f"export '{export.name}': a time partition needs time_column")
        start, end = window.utc_bounds  # timestamptz: the instants; zone-less columns: UTC wall time
        sql, params = build_time_range_query(dialect, base, export.time_column, start, end,
                                             export.time_column_type or "timestamp")
        strategy = "time_window"
        sub_prefix = f"{export.time_column}={window.label}/"
    elif export.mode == "full":
        sql, strategy = base, "full"
    elif export.mode == "cdc":  # the change log, not this query, is read (rivet_core/pipeline/cdc/)
        sql, strategy = base, "cdc"
    elif export.mode == "chunked":
        # The unit of a chunked export is the whole run; its windows are laid out by
        # rivet_core.chunks against the source. `sql` is the base query, which is also
        # what a small table falls back to (a full export).
        sql, strategy = base, "chunked"
    elif export.mode == "incremental":
        assert export.cursor_column is not None
        cursor_column, cursor_low = export.cursor_column, stored_cursor
        sql, params = build_incremental_query(
            dialect, base, export.cursor_column, stored_cursor,
            mode=export.incremental_cursor_mode or "single_column",
            fallback_column=export.cursor_fallback_column)
        if (export.incremental_cursor_mode or "single_column") == "coalesce":
            strip = ("_rivet_coalesced_cursor",)
            cursor_column = "_rivet_coalesced_cursor"
        strategy = "incremental"
    else:
        assert export.time_column is not None and export.days_window is not None
        time_window_start = time_window_cutoff(export.days_window, now)
        sql, params = build_time_window_query(
            dialect, base, export.time_column, time_window_start, export.time_column_type or "timestamp")
        strategy = "time_window"
    spec = destination_spec(config, export, now, sub_prefix)
    if spec.kind == "stdout" and export.mode == "chunked":
        raise ConfigError(f"export '{export.name}': a chunked export cannot write to stdout "
                          "(each window is its own part) — write to local or s3")
    if spec.kind == "stdout" and export.max_file_size_bytes:
        raise ConfigError(f"export '{export.name}': stdout destination cannot rotate parts "
                          "(max_file_size) — remove max_file_size or write to local/s3")
    return ResolvedUnit(
        export=export, engine=engine, source_url=url, tuning=export.resolved_tuning(config.source),
        strategy=strategy, sql=sql, params=list(params), cursor_column=cursor_column,
        cursor_low=cursor_low, strip_columns=strip, overrides=export.column_overrides(),
        table_hint=export.table_parts, dest_spec=spec, writer_options=writer_options(export),
        max_file_size=export.max_file_size_bytes, window=window,
        time_window_start=time_window_start if window is None and export.mode == "time_window" else None)
