"""Raw-YAML parsing and the pre-scans that run before the strict parse (docs/rivet-compat.md "Config load order", step 3).

These checks look at the plain parsed data (dicts and lists, any shape) because the
strict parse would otherwise report them as an unhelpful "unknown field": a tuning knob
one level too high, CSV with a compressor, a TLS mode contradicted by an
accept-invalid flag. YAML syntax errors get hints for the two classic mistakes: tabs in
indentation, and unquoted `{date}`-style template values.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from rivet_core.config.tuning import TUNING_FIELDS
from rivet_core.config.yamlload import load_yaml
from rivet_core.errors import ConfigError

_TAB_INDENT = re.compile(r"^[ ]*\t", re.MULTILINE)
_UNQUOTED_BRACE = re.compile(r":[ \t]+\{[A-Za-z_]*\}", re.MULTILINE)
BRACE_HINT = 'hint: values with { } must be quoted, e.g. path: "./out/{date}"'
TAB_HINT = "hint: replace tabs with spaces — YAML indentation must use spaces"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or "syntax error"
        context = f" ({exc.context})" if exc.context else ""
        return f"{problem}{context}{where}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def parse_yaml_text(text: str, path: str) -> Any:
    """Parse the (substituted) config text, turning parser errors into a ConfigError."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        parts = [f"invalid YAML in '{path}': {_yaml_problem(exc)}"]
        if _TAB_INDENT.search(text):
            parts.append(TAB_HINT)
        if _UNQUOTED_BRACE.search(text):
            parts.append(BRACE_HINT)
        raise ConfigError("\n".join(parts)) from None
    except RecursionError:
        raise ConfigError(f"invalid YAML in '{path}': nesting is too deep") from None


def _misplaced(block: dict[Any, Any]) -> list[str]:
    return [k for k in block if isinstance(k, str) and k in TUNING_FIELDS]


def _scan_source(source: Any) -> list[str]:
    if not isinstance(source, dict):
        return []
    errors = []
    misplaced = _misplaced(source)
    if misplaced:
        errors.append(
            f"source: field(s) [{', '.join(misplaced)}] belong under 'source.tuning:' — "
            "move them into a `tuning:` block inside `source:`"
        )
    tls = source.get("tls")
    if isinstance(tls, dict) and "mode" in tls and tls.get("mode") != "disable":
        mode = tls.get("mode")
        if tls.get("accept_invalid_certs") is True:
            errors.append(
                "source.tls: accept_invalid_certs disables certificate verification, which "
                f"contradicts the explicit mode: {mode} — remove accept_invalid_certs, or "
                "use mode: require if you only need encryption"
            )
        if tls.get("accept_invalid_hostnames") is True:
            errors.append(
                "source.tls: accept_invalid_hostnames disables hostname verification, which "
                f"contradicts the explicit mode: {mode} — remove accept_invalid_hostnames, or "
                "use mode: verify-ca"
            )
    return errors


def _export_label(export: dict[Any, Any], index: int) -> str:
    name = export.get("name")
    return f"export '{name}' (index {index})" if isinstance(name, str) else f"exports[{index}]"


def _scan_export(export: Any, index: int) -> list[str]:
    if not isinstance(export, dict):
        return []
    errors = []
    label = _export_label(export, index)
    misplaced = _misplaced(export)
    if misplaced:
        errors.append(
            f"{label}: field(s) [{', '.join(misplaced)}] belong under 'exports[].tuning:' — "
            "move them into the export's `tuning:` block"
        )
    if export.get("format") == "csv":
        compression = export.get("compression")
        if "compression" in export and compression not in ("none", None):
            errors.append(
                f"{label}: CSV output does not support compression: {compression} — remove "
                "`compression` or use format: parquet"
            )
        profile = export.get("compression_profile")
        if "compression_profile" in export and profile not in ("none", None):
            errors.append(
                f"{label}: CSV output does not support compression_profile ({profile}) — "
                "remove it or use format: parquet"
            )
    return errors


def prescan(data: Any) -> None:
    """Raise one ConfigError listing every pre-scan problem in the parsed data."""
    if not isinstance(data, dict):
        return
    errors = _scan_source(data.get("source"))
    exports = data.get("exports")
    if isinstance(exports, list):
        for index, export in enumerate(exports):
            errors.extend(_scan_export(export, index))
    if errors:
        from rivet_core.config.messages import combine

        raise ConfigError(combine(errors))
