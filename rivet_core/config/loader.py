"""`load_config`: the load pipeline of docs/rivet-compat.md "Config load order", in Rivet's order.

1. read the file; 2. `${NAME}` substitution over the raw text; 3. YAML parse + raw
pre-scans; 4. strict typed parse (pydantic) with one clear message per problem;
5. semantic validation (and query_file reading). Every failure is a `ConfigError`
(exit 1) whose message names the key, the value and the fix; problems of one stage are
reported together. Nothing else escapes: not a pydantic traceback, not a YAML mark dump.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rivet_core.config.extended import config_model_for
from rivet_core.config.limits import nest_shared_prefixes
from rivet_core.config.messages import Problem, code_of, combine
from rivet_core.config.models import RivetConfig
from rivet_core.config.parse_errors import translate
from rivet_core.config.prescan import parse_yaml_text, prescan
from rivet_core.config.substitution import substitute
from rivet_core.config.validate import (
    config_errors,
    emit_warnings,
    read_query_file,
    register_source_secrets,
)
from rivet_core.errors import ConfigError
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet.config")

#: A rivet.yaml is a few KiB; even thousands of exports stay far below this. The cap keeps a
#: wrong `-c` (a data file, a log) from being read whole and fed to the pure-Python YAML
#: parser for minutes; a bigger file is refused at once with a clear error.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _fail(errors: list[str], path: Path) -> ConfigError:
    message = redact_secrets(combine(errors, what=f"config '{path}'"))
    return ConfigError(message, code=code_of(errors))


def _read(path: Path) -> str:
    if "\x00" in str(path):
        raise ConfigError("config file path contains a NUL byte — pass a normal path with -c PATH")
    if not path.exists():
        raise ConfigError(
            f"config file '{path}' not found — create one with `rivet init` or pass -c PATH"
        )
    if path.is_dir():
        raise ConfigError(f"config file '{path}' is a directory — pass the YAML file with -c PATH")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError(f"cannot read config file '{path}': {exc.strerror or exc}") from None
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file '{path}' is {size} bytes, over the {MAX_CONFIG_BYTES // (1024 * 1024)} MiB "
            "limit for a rivet config — check that -c names the YAML file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file '{path}' is not valid UTF-8 — save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file '{path}': {exc.strerror or exc}") from None


def _check_top(data: Any, path: Path) -> dict[str, Any]:
    if data is None:
        raise ConfigError(
            f"config file '{path}' is empty — it needs `source:` and `exports:`; run `rivet init` "
            "to generate one"
        )
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else "a single value"
        raise ConfigError(
            f"config file '{path}' must be a YAML mapping with `source:` and `exports:` at the "
            f"top level, but it is {kind}"
        )
    exports = data.get("exports")
    if isinstance(exports, list) and not exports:
        raise ConfigError(
            "at least one export must be defined — add an entry under `exports:`",
            code="RIVET_CONFIG_NO_EXPORTS",
        )
    return data


def _parse(data: dict[str, Any], path: Path) -> RivetConfig:
    model = config_model_for(data)  # the core models + the integration blocks in scope (extended.py)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _fail(translate(model, exc), path) from None
    except RecursionError:
        raise ConfigError(f"config '{path}' is nested too deeply to be a Rivet config") from None


def load_config(
    path: str | os.PathLike[str], params: Mapping[str, str] | None = None
) -> RivetConfig:
    """Load, substitute, parse and validate a `rivet.yaml`. Raises ConfigError (exit 1).

    `params` are `-p NAME=value` pairs; they win over environment variables in `${NAME}`.
    """
    config_path = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    raw = _read(config_path)
    used: set[str] = set()
    text = substitute(raw, params, where="the config", used=used)
    data = _check_top(parse_yaml_text(text, str(config_path)), config_path)
    prescan(data)
    cfg = _parse(data, config_path)
    cfg.config_path = config_path
    register_source_secrets(cfg.source)
    for exp in cfg.exports:  # a relative SQLite catalog hangs off the config's folder (models.py)
        if exp.iceberg is not None:
            exp.iceberg._config_dir = config_path.parent

    errors, cfg._load_notes = nest_shared_prefixes(cfg)  # before the checks: they see the moved prefixes
    errors = list(errors) + list(config_errors(cfg))
    for exp in cfg.exports:
        if exp.query_file is not None and exp.query is None and exp.table is None:
            try:
                exp.attach_query_file_text(read_query_file(exp, config_path.parent, params, used))
            except ConfigError as exc:
                errors.append(Problem(exc.message))
    if errors:
        raise _fail(errors, config_path)

    for name in sorted(set(params or {}) - used):  # Rivet's words, one line per name
        log.warning("--param '%s' was not referenced by any `${%s}` placeholder in the config — check the "
                    "parameter name (case-sensitive) or remove the unused --param", name, name)
    emit_warnings(cfg)
    return cfg
