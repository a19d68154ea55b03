"""Configuration: the typed `rivet.yaml` and the pipeline that loads it.

`load_config(path, params)` is the only way the engine and the Dagster adapter read a
config: it substitutes `${NAME}`, parses strictly (unknown keys rejected with
did-you-mean), validates every cross-field rule of the reference catalogue and raises
`ConfigError` (exit 1) with one clear message per problem. The models expose the small
computed helpers everyone needs (connection URL, resolved query, compression, overrides,
merged tuning); `render_destination` expands path templates.
"""

from rivet_core.config.loader import load_config
from rivet_core.config.models import (
    DagsterDefaults,
    DestinationConfig,
    ExportConfig,
    ExportDagsterConfig,
    MetaColumnsConfig,
    NotificationsConfig,
    ParquetConfig,
    QualityConfig,
    RivetConfig,
    SlackConfig,
    SourceConfig,
    TlsConfig,
    TuningConfig,
    WebhookConfig,
)
from rivet_core.config.overrides import parse_column_override
from rivet_core.config.sizes import parse_size
from rivet_core.config.templating import render_destination
from rivet_core.config.tuning import ResolvedTuning, resolve_tuning

__all__ = [
    "DagsterDefaults",
    "DestinationConfig",
    "ExportConfig",
    "ExportDagsterConfig",
    "MetaColumnsConfig",
    "NotificationsConfig",
    "ParquetConfig",
    "QualityConfig",
    "ResolvedTuning",
    "RivetConfig",
    "SlackConfig",
    "SourceConfig",
    "TlsConfig",
    "TuningConfig",
    "WebhookConfig",
    "load_config",
    "parse_column_override",
    "parse_size",
    "render_destination",
    "resolve_tuning",
]
