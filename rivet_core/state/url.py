"""Where the state store lives: a SQLite file beside the config, or PostgreSQL by URL.

docs/rivet-compat.md "Config load order": default `.rivet_state.db` in the directory of the config
file; `RIVET_STATE_URL` starting with `postgres` switches to PostgreSQL (the scale-out path).
"""

from __future__ import annotations

import os
from pathlib import Path

from rivet_core.errors import ConfigError

STATE_FILE_NAME = ".rivet_state.db"


def state_url_for(config_path: Path | str | None, env_url: str | None = None) -> str:
    """The state store's URL for a config file: `postgresql+psycopg://…` (from `postgres://`,
    `postgresql://` or `postgresql+psycopg://` in RIVET_STATE_URL / `env_url`) or
    `sqlite:///<config dir>/.rivet_state.db`. The spelling is the one the store has always
    shown (redacted) in its messages."""
    env_url = env_url if env_url is not None else os.environ.get("RIVET_STATE_URL")
    if env_url and env_url.startswith("postgres"):
        url = env_url
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://"):]
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://"):]
        return url
    if config_path is None or str(config_path) == "":
        raise ConfigError(
            "cannot locate the state store: no config path given (the state file lives "
            "beside the config as .rivet_state.db) — pass -c PATH or set RIVET_STATE_URL"
        )
    db = Path(config_path).resolve().parent / STATE_FILE_NAME
    return f"sqlite:///{db}"
