"""Fixtures for the config tests: a minimal valid config as a dict, and writers/loaders."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rivet_core.config import RivetConfig, load_config
from rivet_core.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures"

_BASE: dict[str, Any] = {
    "source": {"type": "postgres", "url_env": "RIVET_TEST_DB_URL"},
    "exports": [
        {
            "name": "orders",
            "table": "public.orders",
            "format": "parquet",
            "destination": {"type": "local", "path": "./out"},
        }
    ],
}


@pytest.fixture
def base() -> dict[str, Any]:
    """A fresh copy of a minimal valid config; tests mutate it."""
    return copy.deepcopy(_BASE)


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    """Write a config (dict → YAML, or raw text) to tmp_path/rivet.yaml and return the path."""

    def _write(data: dict[str, Any] | str, name: str = "rivet.yaml") -> Path:
        path = tmp_path / name
        text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return path

    return _write


@pytest.fixture
def load(write: Callable[..., Path]) -> Callable[..., RivetConfig]:
    """Write and load a config that must be valid."""

    def _load(data: dict[str, Any] | str, params: dict[str, str] | None = None) -> RivetConfig:
        return load_config(write(data), params)

    return _load


@pytest.fixture
def config_error(write: Callable[..., Path]) -> Callable[..., str]:
    """Write a config that must be rejected; return the message (asserting exit code 1)."""

    def _error(data: dict[str, Any] | str, params: dict[str, str] | None = None) -> str:
        with pytest.raises(ConfigError) as info:
            load_config(write(data), params)
        assert info.value.exit_code == 1
        message = str(info.value)
        assert "pydantic" not in message.lower() and "Traceback" not in message
        return message

    return _error
