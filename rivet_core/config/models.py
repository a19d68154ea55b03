"""The typed shape of `rivet.yaml`: strict pydantic v2 models, one per YAML block.

Field names and defaults follow Rivet (docs/config-reference.md) so a Rivet config parses here
unchanged; every model rejects unknown keys (`extra="forbid"`). The models hold *shape*
rules only (types, enums, simple ranges); cross-field rules live in `validate.py` so that
all problems can be collected and reported together. Small computed helpers that the
engine needs everywhere (resolved query, sizes, compression, overrides, tuning, the
connection URL) are methods here so nobody re-derives them differently.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    model_validator,
)

from rivet_core.config.blocks import BlockModel, config_blocks, known_blocks, unknown_block_hint
from rivet_core.config.cdc import CdcConfig
from rivet_core.config.overrides import normalise_column_key, parse_column_override
from rivet_core.config.scalars import Str
from rivet_core.config.scalars import scalar_to_str as _scalar_to_str
from rivet_core.config.sizes import parse_size
from rivet_core.config.source_url import inline_url_password, resolve_source_url, sqlite_url_beside
from rivet_core.config.tuning import ResolvedTuning, merged_tuning_error, resolve_tuning
from rivet_core.errors import ConfigError

if TYPE_CHECKING:  # annotations only: loading a config must not import pyarrow (CLI start-up)
    import pyarrow as pa

log = logging.getLogger("rivet.config")




class _Strict(BlockModel):
    """Base: unknown keys are errors; assignment stays unvalidated for speed (blocks.py)."""


class _CarriesBlocks:
    """The top level and each export may carry integration blocks (blocks.py): the loader's
    model has them as fields (extended.py); `integration(name)` reads one by name."""

    def integration(self, name: str) -> Any:
        """The parsed `<name>:` integration block here, or None when it is absent. Unknown
        names (no integration registers them) are a ConfigError naming the known blocks."""
        if name not in known_blocks() and name not in config_blocks():  # entry points read only when unknown
            raise ConfigError(f"no integration block `{name}`{unknown_block_hint(name)}")
        return getattr(self, name, None)


# --------------------------------------------------------------------------- tuning


class TuningConfig(_Strict):
    """`source.tuning` / `exports[].tuning` (docs/config-reference.md). Unset knobs stay None so the
    source→export merge and the profile defaults (tuning.resolve_tuning) decide."""

    profile: Literal["fast", "balanced", "safe"] | None = None
    batch_size: int | None = Field(default=None, ge=1)
    batch_size_memory_mb: int | None = Field(default=None, ge=1)
    throttle_ms: int | None = Field(default=None, ge=0)
    statement_timeout_s: int | None = Field(default=None, ge=0)
    max_retries: int | None = Field(default=None, ge=0)
    retry_backoff_ms: int | None = Field(default=None, ge=0)
    lock_timeout_s: int | None = Field(default=None, ge=0)
    memory_threshold_mb: int | None = Field(default=None, ge=0)
    max_batch_memory_mb: int | None = Field(default=None, ge=1)
    on_batch_memory_exceeded: Literal["warn", "fail", "auto_shrink"] | None = None
    adaptive: bool | None = None
    min_parallel: int | None = Field(default=None, ge=1)
    max_value_mb: int | None = Field(default=None, ge=0)
    throttle_floor_ms: int | None = Field(default=None, ge=0, le=3_600_000)
    throttle_ceiling_ms: int | None = Field(default=None, ge=0, le=3_600_000)

    def as_dict(self) -> dict[str, Any]:
        """Only the knobs that are set — the input `resolve_tuning` expects."""
        return self.model_dump(exclude_none=True)


# --------------------------------------------------------------------------- source


class TlsConfig(_Strict):
    """`source.tls` (libpq semantics). `mode` defaults to verify-full when the block exists."""

    mode: Literal["disable", "require", "verify-ca", "verify-full"] = "verify-full"
    ca_file: Str | None = None
    accept_invalid_certs: bool = False
    accept_invalid_hostnames: bool = False


class SourceConfig(_Strict):
    """`source:` — where to read from. Exactly one URL form, or the structured form."""

    #: `sqlalchemy`: any SQLAlchemy URL whose dialect is installed (docs/sqlalchemy.md).
    type: Literal["postgres", "mysql", "sqlite", "sqlalchemy"]
    url: Str | None = None
    url_env: Str | None = None
    url_file: Str | None = None
    host: Str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    user: Str | None = None
    password: Str | None = None
    password_env: Str | None = None
    database: Str | None = None
    environment: Literal["local", "replica", "production"] | None = None
    tuning: TuningConfig | None = None
    tls: TlsConfig | None = None

    _warned_plaintext: bool = PrivateAttr(default=False)

    def warn_plaintext_password_once(self) -> None:
        """One WARN per config when a password is written into the file itself."""
        if self._warned_plaintext:
            return
        where = None
        if self.password:
            where = "source.password"
        elif self.url and inline_url_password(self.url):
            where = "a password inside source.url"
        if where:
            self._warned_plaintext = True
            log.warning(
                "rivet.yaml contains %s in plain text — use url_env (or password_env) so the "
                "secret stays out of the config file",
                where,
            )

    def resolve_url(self, config_dir: Path | None = None) -> str:
        """The connection URL (`postgresql://`, `mysql://` or `sqlite:////abs/path`).

        Reads env vars / url_file now (connect time), so an unset variable is reported
        here, not at load. Registers every password it sees for redaction.
        """
        self.warn_plaintext_password_once()
        return resolve_source_url(self, config_dir or Path.cwd())


# --------------------------------------------------------------------------- destination


class DestinationConfig(_Strict):
    """`exports[].destination`: local, s3, gcs, azure or stdout, with Rivet's field names
    (docs/config-reference.md). Which fields each type needs is checked in
    `rivet_core.config.validate.destination_errors`, so every problem is reported at once."""

    type: Literal["local", "s3", "gcs", "azure", "stdout"]
    bucket: Str | None = None
    prefix: Str | None = None
    path: Str | None = None
    region: Str | None = None
    endpoint: Str | None = None
    credentials_file: Str | None = None
    access_key_env: Str | None = None
    secret_key_env: Str | None = None
    session_token_env: Str | None = None
    aws_profile: Str | None = None
    #: S3, GCS, Azure: seconds to wait for a connection / for a response to each request, and
    #: the attempts per request (first try + retries) before the write fails the run. A hung
    #: or dead endpoint then fails the run in about attempts × timeout instead of minutes.
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    max_attempts: int | None = Field(default=None, ge=1, le=20)
    #: Azure: the storage account, and the env var holding its shared key or a SAS token
    #: (neither: DefaultAzureCredential). GCS/Azure: allow_anonymous sends no credentials.
    account_name: Str | None = None
    account_key_env: Str | None = None
    sas_token_env: Str | None = None
    allow_anonymous: bool = False

    @property
    def local_path(self) -> str:
        """Local directory: `path`, else `prefix`, else the working directory (Rivet rule)."""
        return self.path or self.prefix or "."


# --------------------------------------------------------------------------- export blocks


def _row_hash_shape(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, list):
        return [_scalar_to_str(v) for v in value]
    raise ValueError("must be true, false or a list of column names")


class MetaColumnsConfig(_Strict):
    """`exports[].meta_columns`: `_rivet_exported_at` and `_rivet_row_hash`."""

    exported_at: bool = False
    row_hash: Annotated[bool | list[str], BeforeValidator(_row_hash_shape)] = False

    @property
    def row_hash_columns(self) -> list[str] | None:
        """The explicit column list, or None when the hash covers every column."""
        return list(self.row_hash) if isinstance(self.row_hash, list) else None


class QualityConfig(_Strict):
    """`exports[].quality` (docs/rivet-compat.md "Quality gates")."""

    row_count_min: int | None = Field(default=None, ge=0)
    row_count_max: int | None = Field(default=None, ge=0)
    null_ratio_max: dict[str, float] = Field(default_factory=dict)
    unique_columns: list[Str] = Field(default_factory=list)
    unique_max_entries: int | None = Field(default=None, ge=1)


class ParquetConfig(_Strict):
    """`exports[].parquet` row-group sizing. Omitting the block means library defaults."""

    row_group_strategy: Literal["auto", "fixed_rows", "fixed_memory"] = "auto"
    row_group_rows: int | None = Field(default=None, ge=0)
    target_row_group_mb: int = Field(default=128, ge=1)
    max_row_group_mb: int | None = Field(default=None, ge=1)


class RetentionConfig(_Strict):
    """`exports[].retention` — what `rivet gc` and every successful run of the export keep at
    its prefix (rivet_core/manifest/retention.py, docs/adr/0007-readable-layout-and-retention.md).

    A run is kept when it is one of the last `keep_runs` successful runs or finished within
    `keep_days` days (either rule keeps it); the current manifest's run is always kept.
    Superseded files move to `_quarantine/gc/<stamp>/` first and are deleted once they have
    been there `grace_hours` and no kept run lists them."""

    keep_runs: int | None = Field(default=None, ge=1)
    keep_days: float | None = Field(default=None, gt=0)
    grace_hours: float = Field(default=24, ge=0)

    @model_validator(mode="after")
    def _one_rule(self) -> RetentionConfig:
        if self.keep_runs is None and self.keep_days is None:
            raise ValueError(
                "set keep_runs (keep the last N runs) or keep_days (keep the runs of the last D "
                "days), or both — e.g. `retention: {keep_runs: 3}`")
        return self


class IcebergConfig(_Strict):
    """`exports[].iceberg` — where a `table_format: iceberg` export registers its table
    (docs/adr/0009-table-formats.md): pyiceberg's SQL catalog on a SQLAlchemy URL (SQLite or
    PostgreSQL), created on first use. The table's files stay at the export's prefix (its
    warehouse); the catalog holds only the pointer to the table's current metadata. Exactly
    one of `catalog_url` / `catalog_url_env` (rivet_core/config/validate.py); the URL is a
    credential and is redacted wherever it is shown."""

    catalog_url: Str | None = None
    catalog_url_env: Str | None = None
    #: The catalog's name (the `catalog_name` column of pyiceberg's catalog tables): another
    #: engine reading the same catalog database names it so.
    catalog_name: Str = "rivet"
    namespace: Str | None = None
    #: The table's name in `namespace`; None: the export's name.
    table: Str | None = None
    #: The config file's folder (set by `load_config`): a relative SQLite catalog path hangs
    #: off it, as a relative local destination path does (rivet_core/destination/__init__.py).
    _config_dir: Path | None = PrivateAttr(default=None)

    def resolve_catalog_url(self) -> str:
        """The catalog's SQLAlchemy URL, read from the environment now (run time, so an unset
        variable is reported when the table is needed, not at load); its password is
        registered for redaction. `postgresql://` means psycopg 3, the driver the core already
        has (SQLAlchemy's bare `postgresql://` would ask for psycopg2)."""
        import os

        from rivet_core.redact import register_secret

        url = self.catalog_url
        if url is None and self.catalog_url_env:
            url = os.environ.get(self.catalog_url_env)
            if not url:
                raise ConfigError(f"iceberg.catalog_url_env names env var '{self.catalog_url_env}', which is "
                                  "not set — export it (e.g. sqlite:////var/lib/rivet/catalog.db)")
        if not url:
            raise ConfigError("iceberg: set catalog_url or catalog_url_env")
        register_secret(inline_url_password(url))
        if self._config_dir is not None:  # a relative SQLite file sits beside the config
            url = sqlite_url_beside(url, self._config_dir, "iceberg.catalog_url")
        for bare in ("postgresql://", "postgres://"):
            if url.startswith(bare):
                url = "postgresql+psycopg://" + url[len(bare):]
        return url


# --------------------------------------------------------------------------- export


def _strip_sql(sql: str) -> str:
    """Drop trailing whitespace and `;` — the query is wrapped as a subquery later, where a
    terminator is a syntax error."""
    return sql.rstrip().rstrip(";").rstrip()


Compression = Literal["zstd", "snappy", "gzip", "lz4", "none"]
_PROFILE_CODECS: dict[str, tuple[str, int | None]] = {
    "none": ("none", None),
    "fast": ("snappy", None),
    "balanced": ("zstd", 3),
    "compact": ("zstd", 9),
}
_DEFAULT_LEVELS: dict[str, int] = {"zstd": 3, "gzip": 6}


class ExportConfig(_Strict, _CarriesBlocks):
    """One entry of `exports:` — what to read, how, and where to write it."""

    name: Str
    description: Str | None = None
    # what to read: exactly one
    query: Str | None = None
    query_file: Str | None = None
    table: Str | None = None
    #: `mode: cdc`: several tables captured through one change stream (config/cdc.py).
    tables: list[Str] | None = None
    #: `mode: cdc`: the change stream's knobs (config/cdc.py CdcConfig).
    cdc: CdcConfig | None = None
    mode: Literal["full", "incremental", "chunked", "time_window", "cdc"] = "full"
    # incremental
    cursor_column: Str | None = None
    cursor_fallback_column: Str | None = None
    incremental_cursor_mode: Literal["single_column", "coalesce"] = "single_column"
    # time_window
    time_column: Str | None = None
    time_column_type: Literal["timestamp", "unix"] = "timestamp"
    days_window: int | None = None
    # output
    format: Literal["parquet", "csv"]
    compression: Compression = "zstd"
    compression_level: int | None = None
    compression_profile: Literal["none", "fast", "balanced", "compact"] | None = None
    skip_empty: bool = False
    max_file_size: Str | None = None
    destination: DestinationConfig
    verify: Literal["size", "content"] = "size"
    meta_columns: MetaColumnsConfig = Field(default_factory=MetaColumnsConfig)
    quality: QualityConfig | None = None
    columns: dict[Str, Str] = Field(default_factory=dict)
    on_schema_drift: Literal["warn", "continue", "fail"] = "warn"
    shape_drift_warn_factor: float = Field(default=2.0, ge=0)
    parquet: ParquetConfig | None = None
    #: Commit each run's Parquet parts as a Delta Lake or an Iceberg table at the prefix
    #: (docs/adr/0009-table-formats.md); None: plain files, as before.
    table_format: Literal["delta", "iceberg"] | None = None
    #: Where the parts land at the prefix: `data` (ours, docs/adr/0007-readable-layout-and-retention.md)
    #: or `rivet` (Rivet's flat names at the prefix root, so Rivet users' globs keep working).
    layout: Literal["data", "rivet"] = "data"
    #: `table_format: iceberg`: the catalog the table is registered in (IcebergConfig).
    iceberg: IcebergConfig | None = None
    #: `mode: incremental` + `table_format`: upsert on these key columns (an updated row
    #: replaces its old version) instead of appending.
    merge_on: list[Str] | None = None
    tuning: TuningConfig | None = None
    #: What `rivet gc` and every successful run keep at the prefix (RetentionConfig); None:
    #: nothing is removed unless `rivet gc` is given a rule on its command line.
    retention: RetentionConfig | None = None
    # chunked (rivet_core.chunks plans the windows)
    chunk_column: Str | None = None
    chunk_by_key: Str | None = None
    chunk_size: int = 100_000
    chunk_size_memory_mb: int | None = None
    chunk_count: int | None = None
    chunk_by_days: int | None = None
    chunk_dense: bool = False
    parallel: int = 1
    chunk_checkpoint: bool = False
    chunk_max_attempts: int | None = None
    keyset_incremental: bool = False
    #: Chunked exports whose windows are exported one by one by a planner: a column that moves
    #: on every insert and update (e.g. `updated_at`). The planner fingerprints each window
    #: (COUNT + MAX of it) and re-exports the windows whose fingerprint changed
    #: (rivet_core/chunks/fingerprint.py).
    change_column: Str | None = None
    # partitioning (not supported yet)
    partition_by: Str | None = None
    partition_granularity: Literal["day", "month", "year"] = "day"
    # planning hints (advisory)
    wave: int | None = None
    parallel_safe: bool | None = None
    source_group: Str | None = None
    reconcile_required: bool | None = None
    target: Str | None = None

    #: query_file contents, read (and `${k}`-substituted) by the loader.
    _query_file_text: str | None = PrivateAttr(default=None)

    # -- what to read ---------------------------------------------------------

    def attach_query_file_text(self, text: str) -> None:
        """Record the `query_file` contents the loader read (after `${k}` substitution).

        The file is read relative to the config file, which the model does not know, so
        the loader resolves it and hands the text over; `resolved_query` then serves it.
        """
        self._query_file_text = text

    @property
    def table_parts(self) -> tuple[str | None, str] | None:
        """`table:` split into (schema, name); None for query exports. Validated at load."""
        if self.table is None:
            return None
        parts = self.table.split(".")
        if len(parts) == 1:
            return None, parts[0]
        return parts[0], parts[1]

    @property
    def resolved_query(self) -> str:
        """The base SQL: `query`, the `query_file` contents, or `SELECT * FROM <table>`.

        Identifiers are unquoted on purpose; dialect quoting is the query builder's job.
        """
        if self.query is not None:
            return _strip_sql(self.query)
        if self.query_file is not None:
            if self._query_file_text is None:
                raise ConfigError(
                    f"export '{self.name}': query_file '{self.query_file}' was not read — "
                    "load the config with load_config() so the file is resolved"
                )
            return _strip_sql(self._query_file_text)
        if self.table is not None:
            return f"SELECT * FROM {self.table}"
        raise ConfigError(
            f"export '{self.name}': specify exactly one of 'query', 'query_file', 'table', "
            "or 'tables'"
        )

    # -- output ---------------------------------------------------------------

    @property
    def max_file_size_bytes(self) -> int | None:
        """`max_file_size` in bytes (None = no rotation)."""
        return None if self.max_file_size is None else parse_size(self.max_file_size)

    def effective_compression(self) -> tuple[str, int | None]:
        """(codec, level) the writer should use.

        `compression_profile` wins over `compression`/`compression_level` (the loader
        warns when they conflict); CSV is never compressed; zstd/gzip get Rivet's
        default levels 3/6 when no level is given.
        """
        if self.format == "csv":
            return "none", None
        if self.compression_profile is not None:
            return _PROFILE_CODECS[self.compression_profile]
        level = self.compression_level
        if level is None:
            level = _DEFAULT_LEVELS.get(self.compression)
        return self.compression, level

    def compression_conflict(self) -> str | None:
        """Why the explicit compression settings are ignored by the profile, if they are."""
        if self.compression_profile is None or self.format == "csv":
            return None
        codec, level = _PROFILE_CODECS[self.compression_profile]
        explicit = self.model_fields_set
        clashes = []
        if "compression" in explicit and self.compression != codec:
            clashes.append(f"compression: {self.compression}")
        if "compression_level" in explicit and self.compression_level != level:
            clashes.append(f"compression_level: {self.compression_level}")
        if not clashes:
            return None
        return (
            f"export '{self.name}': compression_profile: {self.compression_profile} overrides "
            f"{' and '.join(clashes)} (using {codec}"
            + (f" level {level}" if level is not None else "")
            + ") — remove one of them"
        )

    def column_overrides(self) -> dict[str, pa.DataType]:
        """`columns:` as {bare column name: Arrow type} (a `table.` qualifier is stripped)."""
        return {
            normalise_column_key(key): parse_column_override(value, column=key)
            for key, value in self.columns.items()
        }

    def resolved_tuning(self, source: SourceConfig) -> ResolvedTuning:
        """Source tuning merged with this export's tuning over the profile defaults."""
        error = merged_tuning_error(self.name, self.tuning, source.tuning)
        if error:
            raise ConfigError(error)
        return resolve_tuning(
            source.tuning.as_dict() if source.tuning else None,
            self.tuning.as_dict() if self.tuning else None,
            source.environment,
        )


# --------------------------------------------------------------------------- notifications

SlackEvent = Literal["failure", "schema_change", "degraded"]
WebhookEvent = Literal["failure", "schema_change", "degraded", "success"]


def _env_or_none(var: str | None, what: str) -> str | None:
    import os

    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        log.warning("%s names env var '%s', which is not set — notification skipped", what, var)
        return None
    return value


class SlackConfig(_Strict):
    """`notifications.slack` — Rivet's Slack incoming webhook."""

    webhook_url: Str | None = None
    webhook_url_env: Str | None = None
    on: list[SlackEvent] = Field(default_factory=lambda: ["failure"])

    def resolve_url(self) -> str | None:
        """The webhook URL; None (with a WARN) when `webhook_url_env` is unset, as Rivet does."""
        return self.webhook_url or _env_or_none(self.webhook_url_env, "notifications.slack")


class WebhookConfig(_Strict):
    """`notifications.webhook` (ours): POST a JSON summary to any HTTP endpoint.

    Header values may use `${VAR}`; like every string in the file they are substituted
    when the config loads.
    """

    url: Str | None = None
    url_env: Str | None = None
    on: list[WebhookEvent] = Field(default_factory=lambda: ["failure"])
    headers: dict[Str, Str] = Field(default_factory=dict)
    timeout_s: float = Field(default=10, gt=0)

    def resolve_url(self) -> str | None:
        """The endpoint URL; None (with a WARN) when `url_env` is unset."""
        return self.url or _env_or_none(self.url_env, "notifications.webhook")


class NotificationsConfig(_Strict):
    """`notifications:` — Slack and/or a generic webhook."""

    slack: SlackConfig | None = None
    webhook: WebhookConfig | None = None


# --------------------------------------------------------------------------- root


class RivetConfig(_Strict, _CarriesBlocks):
    """The whole `rivet.yaml`. `config_path`/`config_dir` are set by `load_config`."""

    source: SourceConfig
    exports: list[ExportConfig]
    notifications: NotificationsConfig | None = None
    parallel_exports: bool = False
    parallel_export_processes: bool = False
    load: Any = None  # warehouse load (Rivet); ignored by extract commands

    _config_path: Path | None = PrivateAttr(default=None)
    #: Warnings the load decided on (e.g. shared destinations moved into sub-folders,
    #: config/limits.py), logged once by `validate.emit_warnings`.
    _load_notes: list[str] = PrivateAttr(default_factory=list)

    @property
    def config_path(self) -> Path:
        """Absolute path of the file this config came from."""
        return self._config_path or (Path.cwd() / "rivet.yaml")

    @config_path.setter
    def config_path(self, value: Path) -> None:
        self._config_path = Path(value).absolute()

    @property
    def config_dir(self) -> Path:
        """Directory of the config file: base for query_file, url_file, sqlite paths, state."""
        return self.config_path.parent

    @property
    def state_path(self) -> Path:
        """Default SQLite state store location (next to the config file)."""
        return self.config_dir / ".rivet_state.db"

    def source_url(self) -> str:
        """`source.resolve_url(config_dir)` — the connection URL."""
        return self.source.resolve_url(self.config_dir)

    def export(self, name: str) -> ExportConfig:
        """The export called `name`; ConfigError listing the known names otherwise."""
        for exp in self.exports:
            if exp.name == name:
                return exp
        known = ", ".join(e.name for e in self.exports)
        raise ConfigError(f"unknown export '{name}'; known exports: {known}")

    def select(self, names: list[str] | None) -> list[ExportConfig]:
        """Exports named in `names` in config order (all of them when None or empty)."""
        if not names:
            return list(self.exports)
        for name in names:
            self.export(name)  # raises on an unknown name
        wanted = set(names)
        return [e for e in self.exports if e.name in wanted]
