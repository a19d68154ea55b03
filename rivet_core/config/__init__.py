"""Configuration: the typed `rivet.yaml` and the pipeline that loads it.

`load_config(path, params)` is the only way the engine and the integrations read a
config: it substitutes `${NAME}`, parses strictly (unknown keys rejected with
did-you-mean), validates every cross-field rule of the reference catalogue and raises
`ConfigError` (exit 1) with one clear message per problem. The models expose the small
computed helpers everyone needs (connection URL, resolved query, compression, overrides,
merged tuning); `render_destination` expands path templates. Integrations add their own
namespaced blocks (`ConfigBlock`, blocks.py).
"""

from typing import Any

from rivet_core.config.blocks import (
    BlockModel,
    ConfigBlock,
    config_blocks,
    deprecated_block_model,
    register_config_block,
)
from rivet_core.config.loader import load_config
from rivet_core.config.models import (
    DestinationConfig,
    ExportConfig,
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
    "BlockModel",
    "ConfigBlock",
    "DestinationConfig",
    "ExportConfig",
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
    "config_blocks",
    "load_config",
    "parse_column_override",
    "parse_size",
    "register_config_block",
    "render_destination",
    "resolve_tuning",
]


def __getattr__(name: str) -> Any:
    """Deprecated names: an integration block's models (blocks.py) now live in its package."""
    return deprecated_block_model(__name__, name)
