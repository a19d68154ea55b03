"""Integration config blocks: the namespaced YAML blocks an integration adds to `rivet.yaml`.

The core config knows only that the top level and each export may carry blocks that belong
to an integration, each under the integration's name (`<name>:`); it does not know their
fields. An integration describes its block as a `ConfigBlock` — the pydantic models of the
export block and of the top-level defaults, the checks that need the whole export, and the
lines `rivet init` writes — and registers it under the entry point group
`rivet.config_blocks` of its package metadata (pyproject.toml: `<name> = "module:BLOCK"`).

The registry reads the entry points lazily, on the first config load that has a key which
is neither a core field nor a block already registered (`blocks_for`), so no integration is
imported until a config names one; a block module must therefore stay as light as the config
loader (pydantic and this module, not the integration's runtime). Reading the entry points
scans every installed distribution's metadata, and loading a block builds its models and a
config model extended by them — together about a tenth of `rivet run`'s start-up
(docs/benchmarks.md "Start-up"), which a config without integration keys does not pay.
`register_config_block` adds a block from code as well (an integration registers its own
block when imported, so it is known even where the package metadata is not installed, and is
part of every config loaded in that process).

The loader validates with a config model that carries the registered blocks as fields
(extended.py), so a block's errors read like the core's — the same locations
(`exports[0].<name>`), the same sentences (parse_errors.py) — and a key that is neither a
core field nor a registered block is reported with the blocks that are known and the package
to install (`unknown_block_hint`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from rivet_core.errors import best_effort

log = logging.getLogger("rivet.config")

#: The entry point group integrations register their blocks under.
ENTRY_POINT_GROUP = "rivet.config_blocks"


class BlockModel(BaseModel):
    """Base of every config model, the core's and an integration block's: unknown keys are
    errors; assignment stays unvalidated for speed."""

    model_config = ConfigDict(extra="forbid", populate_by_name=False)

    def explicit(self) -> dict[str, Any]:
        """The fields the YAML actually set (defaults excluded)."""
        return self.model_dump(exclude_unset=True)


@dataclass(frozen=True)
class ConfigBlock:
    """One integration's block: `exports[].<name>` and, optionally, a top-level `<name>:`."""

    #: The YAML key (a Python identifier that is not a core field).
    name: str
    #: The model of `exports[].<name>`.
    export_model: type[BaseModel]
    #: The model of the top-level `<name>:` (defaults for every export), if the block has one.
    defaults_model: type[BaseModel] | None = None
    #: Checks that need the export around the block: (export, its parsed block or None,
    #: "export '<name>'") → problems, each a full sentence with the fix (validate.py).
    check_export: Callable[[Any, Any, str], list[str]] | None = None
    #: `rivet init`: the top-level block's YAML lines, given a name for the generated
    #: exports as a set (the source schema) — or None to write no top-level block.
    scaffold_defaults: Callable[[str], list[str]] | None = None
    #: `rivet init`: one export's block lines (relative indent), given the YAML-quoted cron
    #: the export should run on.
    scaffold_export: Callable[[str], list[str]] | None = None
    #: The distribution that provides the block (named in install hints).
    package: str | None = None
    #: `rivet doctor`, for a config that uses the block: checks of the integration's own
    #: runtime settings (its instance, its environment) → [(name, ok, detail, fix)]. As light
    #: as the block module: the core calls it without knowing the integration.
    doctor_checks: Callable[[Any], list[tuple[str, bool, str, str | None]]] | None = None

    def models(self) -> list[type[BaseModel]]:
        """The block's top models (export block first)."""
        return [self.export_model, *([self.defaults_model] if self.defaults_model else [])]


_explicit: dict[str, ConfigBlock] = {}
_from_entry_points: dict[str, ConfigBlock] | None = None
#: Entry points that failed to load: name → why (named when the block is then unknown).
_broken: dict[str, str] = {}


def register_config_block(block: ConfigBlock) -> None:
    """Make `block` known to every config loaded from now on (idempotent per name)."""
    if not block.name.isidentifier():
        raise ValueError(f"config block name {block.name!r} must be a Python identifier")
    _explicit[block.name] = block


def _load_entry_points() -> dict[str, ConfigBlock]:
    found: dict[str, ConfigBlock] = {}
    from importlib.metadata import entry_points  # ~25 ms of imports, paid only by a scan

    for point in entry_points(group=ENTRY_POINT_GROUP):
        # A broken integration must not break loading configs that do not use its block.
        with best_effort(f"config block {point.name!r} (entry point {point.value})",
                         message="{step} failed to load: {reason}", logger=log) as attempt:
            block = point.load()
        if attempt.failed:
            _broken[point.name] = f"{attempt.error.__class__.__name__}: {attempt.reason}"
            continue
        if not isinstance(block, ConfigBlock) or block.name != point.name:
            _broken[point.name] = f"{point.value} is not a ConfigBlock named {point.name!r}"
            log.warning("config block entry point %r: %s", point.name, _broken[point.name])
            continue
        found[point.name] = block
    return found


def config_blocks() -> dict[str, ConfigBlock]:
    """Every registered block by name: the entry points (read once) and `register_config_block`."""
    global _from_entry_points
    if _from_entry_points is None:
        _from_entry_points = _load_entry_points()
    return {**_from_entry_points, **_explicit}


def known_blocks() -> dict[str, ConfigBlock]:
    """The blocks known without reading the entry points: those registered from code and
    those the entry points gave if they were read already."""
    return {**(_from_entry_points or {}), **_explicit}


def blocks_for(keys: set[str]) -> dict[str, ConfigBlock]:
    """The blocks a config whose non-core keys are `keys` is validated with: every known
    block, after reading the entry points only when a key is not a known block yet."""
    if keys - set(known_blocks()):
        return config_blocks()
    return known_blocks()


def unknown_block_hint(name: str) -> str:
    """Why `<name>:` is not a known block, and the fix (appended to the unknown-field message)."""
    known = ", ".join(f"`{n}`" for n in sorted(config_blocks())) or "none"
    if name in _broken:
        return (f" — `{name}` is an integration block whose package failed to load ({_broken[name]}); "
                "reinstall that package")
    if name == "load" and name not in config_blocks():
        return (" — an export's `load:` is Rivet's warehouse load (`rivet load` into BigQuery, "
                "Snowflake, …), which this tool does not run: it exports files only, so a config that "
                "expects the load would silently skip it. Remove `load:` and load the exported Parquet "
                "with the warehouse's own loader (or an orchestrator's asset downstream of the export)")
    return (f" — not a Rivet field, and no installed integration provides a `{name}:` block "
            f"(integration blocks: {known}). Remove it, or install the integration that provides it "
            f"(its package registers the block under the entry point group {ENTRY_POINT_GROUP}, "
            f"e.g. `pip install rivet-{name.replace('_', '-')}`)")


def model_named(name: str) -> type[BaseModel] | None:
    """A registered block's top model by class name (the deprecated re-exports of api.py)."""
    for block in config_blocks().values():
        for model in block.models():
            if model.__name__ == name:
                return model
    return None




def deprecated_block_model(module: str, name: str) -> type[BaseModel]:
    """A module `__getattr__` for names that moved to an integration: a registered block's
    model by class name, with a DeprecationWarning naming its new home; else AttributeError."""
    model = model_named(name)
    if model is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(f"{module}.{name} is deprecated — the model belongs to its integration: "
                  f"import it from {model.__module__}", DeprecationWarning, stacklevel=3)
    return model


__all__ = ["ENTRY_POINT_GROUP", "BlockModel", "ConfigBlock", "blocks_for", "config_blocks", "deprecated_block_model",
           "known_blocks", "model_named", "register_config_block", "unknown_block_hint"]
