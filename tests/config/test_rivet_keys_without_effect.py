"""Rivet keys that load here but would change nothing are never accepted silently (issue 35 item 1).

Each such key loads (Rivet's shipped configs set them: `wave`/`parallel_safe` in 75 files) and
is named once per load in a warning with its reason and the fix; an export-level `load:`
(Rivet's warehouse load, which this tool does not run) is refused with the reason.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from rivet_core.config import load_config
from rivet_core.errors import ConfigError


def _config(tmp_path: Path, top: dict, export: dict) -> Path:
    path = tmp_path / "rivet.yaml"
    path.write_text(yaml.safe_dump({
        "source": {"type": "sqlite", "url": "sqlite:///src.db"}, **top,
        "exports": [{"name": "orders", "table": "orders", "format": "parquet",
                     "destination": {"type": "local", "path": "out"}, **export}]}))
    return path


@pytest.mark.parametrize("top, export, key", [
    ({"parallel_exports": True}, {}, "parallel_exports"),
    ({"parallel_export_processes": True}, {}, "parallel_export_processes"),
    ({"load": {"target": "bigquery"}}, {}, "sets load,"),
    ({}, {"tuning": {"adaptive": True}}, "adaptive (tuning)"),
    ({}, {"tuning": {"min_parallel": 2}}, "min_parallel (tuning)"),
    ({}, {"shape_drift_warn_factor": 3.0}, "shape_drift_warn_factor"),
    ({}, {"wave": 2, "parallel_safe": True, "source_group": "replica", "reconcile_required": True,
          "target": "bigquery"}, "planning hints"),
])
def test_a_rivet_key_without_effect_loads_and_is_named_once_with_its_fix(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, top: dict, export: dict, key: str) -> None:
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        load_config(_config(tmp_path, top, export))
    lines = [r.getMessage() for r in caplog.records if key in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert "has no effect here" in lines[0] and ("remove the key" in lines[0] or "can stay" in lines[0])
    if not top:
        assert "'orders'" in lines[0]


def test_a_config_without_such_keys_warns_nothing_about_them(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        load_config(_config(tmp_path, {}, {}))
    assert "no effect here" not in caplog.text


def test_an_export_level_load_block_is_refused_naming_rivets_warehouse_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"`load:` is Rivet's warehouse load .* Remove `load:`"):
        load_config(_config(tmp_path, {}, {"load": {"target": "bigquery"}}))
