"""The config model the loader validates with: the core models plus the registered blocks.

`config_model()` subclasses `ExportConfig` and `RivetConfig` with one optional field per
registered integration block (blocks.py): `exports[].<name>` typed by the block's export
model, the top-level `<name>` by its defaults model. Validation then treats a block like any
core field — its errors carry their YAML location and read like the core's
(parse_errors.py walks these classes) — and a loaded config answers `export.<name>` and
`export.integration(name)` with the parsed block. With no block in scope the core models
are used as they are. The classes are built once per set of blocks.

Which blocks are in scope is the loader's question (`config_model_for`): every block known in
the process, and the entry points' blocks too when the config has a key that is not a core
field (blocks.py `blocks_for`), so a config without integration keys costs no entry-point
scan.
"""

from __future__ import annotations

from typing import Any

from pydantic import create_model

from rivet_core.config.blocks import ConfigBlock, blocks_for, config_blocks
from rivet_core.config.models import ExportConfig, RivetConfig

_built: dict[tuple[Any, ...], type[RivetConfig]] = {}


def _check_names(blocks: dict[str, ConfigBlock]) -> None:
    core = set(ExportConfig.model_fields) | set(RivetConfig.model_fields)
    clash = sorted(set(blocks) & core)
    if clash:
        raise ValueError(f"integration config block(s) {', '.join(clash)} clash with core config fields "
                         "— an integration must name its block after itself")


def _build(blocks: dict[str, ConfigBlock]) -> type[RivetConfig]:
    _check_names(blocks)
    export_fields: dict[str, Any] = {name: (b.export_model | None, None) for name, b in blocks.items()}
    export_model = create_model("ExportConfig", __base__=ExportConfig, __module__=ExportConfig.__module__,
                                __doc__=ExportConfig.__doc__, **export_fields)
    root_fields: dict[str, Any] = {"exports": (list[export_model], ...)}  # type: ignore[valid-type]
    root_fields |= {name: (b.defaults_model | None, None) for name, b in blocks.items() if b.defaults_model}
    return create_model("RivetConfig", __base__=RivetConfig, __module__=RivetConfig.__module__,
                        __doc__=RivetConfig.__doc__, **root_fields)


def config_model() -> type[RivetConfig]:
    """`RivetConfig` with every registered integration block as a field (the core one if none)."""
    return _model(config_blocks())


def _non_core_keys(data: dict[str, Any]) -> set[str]:
    keys = {str(k) for k in data} - set(RivetConfig.model_fields)
    exports = data.get("exports")
    export_fields = set(ExportConfig.model_fields)
    for export in exports if isinstance(exports, list) else ():
        if isinstance(export, dict):
            keys |= {str(k) for k in export} - export_fields
    return keys


def config_model_for(data: dict[str, Any]) -> type[RivetConfig]:
    """The model to validate the parsed YAML `data` with: the core models plus the blocks in
    scope (the module docstring)."""
    return _model(blocks_for(_non_core_keys(data)))


def _model(blocks: dict[str, ConfigBlock]) -> type[RivetConfig]:
    if not blocks:
        return RivetConfig
    key = tuple((name, b.export_model, b.defaults_model) for name, b in sorted(blocks.items()))
    model = _built.get(key)
    if model is None:
        model = _built[key] = _build(blocks)
    return model


__all__ = ["config_model", "config_model_for"]
