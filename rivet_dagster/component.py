"""`RivetExportsComponent`: rivet exports in a `dg` project, declared in a `defs.yaml`.

    # src/<project>/defs/shop/defs.yaml
    type: rivet_dagster.RivetExportsComponent
    attributes:
      config: rivet.yaml          # relative to this defs.yaml's folder
      key_prefix: shop            # optional: in front of every asset key
      group_name: shop_exports    # optional: replaces the groups of rivet.yaml
      owners: [team:data]         # optional
      tags: {domain: sales}       # optional
    post_processing: …            # Dagster's own, as for every component

Each instance builds `build_definitions(config, …)` (factory.py), so the assets, checks,
jobs, the chunk planner sensors and the lineage are exactly those of the Python entry
point, and any number of instances merge with each other and with the project's own
definitions. `dg list components` finds the class through the package's
`dagster_dg_cli.registry_modules` entry point; `dg scaffold defs
rivet_dagster.RivetExportsComponent <folder>` writes the `defs.yaml` and a commented
starter `rivet.yaml` — or, with `--json-params '{"source_env": "DATABASE_URL"}'`, the
config `rivet init` generates from that live database.

A broken rivet.yaml fails `dg check defs` with the CLI's own message, naming the file,
once (not again as the cause of a cause). An asset key, job, schedule or sensor name that a
Python module of the defs folder or another rivet component defines too is refused naming
both files, the export and the fix (`key_prefix`, `source_assets: false`), before Dagster's
bare "Duplicate asset key" — components of other integrations are not looked into. With
its source variable unset, `dg scaffold defs … --json-params` fails in one line and leaves
no folder behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import BaseModel, Field

from rivet_core import api
from rivet_dagster.factory import build_definitions

_log = logging.getLogger(__name__)

STARTER_CONFIG = """\
# Exports of this component: each becomes a Dagster asset (see docs/dagster-guide.md).
# Generate one from a live database instead: rivet init --source-env DATABASE_URL -o rivet.yaml
# Check it without Dagster: rivet check -c rivet.yaml
source:
  type: postgres            # postgres | mysql | sqlite
  url_env: DATABASE_URL     # the URL (with its password) stays in the environment

exports:
  - name: orders
    table: public.orders
    mode: full              # full | incremental (cursor_column) | time_window | chunked
    format: parquet
    destination:
      type: local           # local | s3
      path: output/orders   # relative to this file
    # dagster:
    #   automation_condition: {on_cron: "0 3 * * *"}   # or eager | on_missing, or schedule: "<cron>"
"""


#: (component tree of the load in progress, source table keys already defined in it).
_defined_sources: tuple[object, set[dg.AssetKey]] = (None, set())


def _first_definer(context: dg.ComponentLoadContext) -> Callable[[dg.AssetKey], bool]:
    """Accepts a source table key only the first time it is seen in this load of the code
    location. Two instances reading one table must not both define its asset: `dg` adds
    each instance's own origin and code reference to the specs it builds, so the two specs
    would differ and conflict. Exports of later instances still depend on the key."""
    global _defined_sources
    tree = context.component_tree
    if _defined_sources[0] is not tree:
        _defined_sources = (tree, set())
    seen = _defined_sources[1]

    def keep(key: dg.AssetKey) -> bool:
        if key in seen:
            return False
        seen.add(key)
        return True

    return keep


class _ComponentChecks(dg.AssetChecksDefinition):
    """A check definition that stays one when `dg` edits it. `dg` stamps each component's
    definitions with its origin (`Definitions.with_definition_metadata_update`), which remakes
    every check as a plain `AssetsDefinition` (Dagster's `with_attributes`); the repository
    then turns it back into a check with `execution_type` passed on, and Dagster printed a
    BetaWarning about that parameter on every load and launch (issue 34). Returning this
    class from `with_attributes` leaves the repository nothing to convert."""

    @classmethod
    def of(cls, checks: dg.AssetsDefinition) -> _ComponentChecks:
        """`checks`, as this class: the same attributes, Dagster's Beta notice about its own
        `execution_type` attribute kept out (no user code passes it)."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=dg.BetaWarning)
            return cls(**checks.get_attributes_dict())

    def with_attributes(self, **kwargs: Any) -> _ComponentChecks:  # type: ignore[override]
        return _ComponentChecks.of(super().with_attributes(**kwargs))


def _component_checks(defs: dg.Definitions) -> dg.Definitions:
    """`defs` with every check as a `_ComponentChecks`."""
    checks = [_ComponentChecks.of(c) for c in defs.asset_checks or []]
    if not checks:
        return defs
    fields = ("assets", "schedules", "sensors", "jobs", "resources", "executor", "loggers", "metadata")
    return dg.Definitions(**{f: getattr(defs, f) for f in fields}, asset_checks=checks)


#: Where a name is defined: (the file, what in it — an export of a rivet.yaml, a Python object).
Owner = tuple[Path, str]

#: (component tree of the load in progress, names the rivet components defined so far in it).
_defined_names: tuple[object, dict[str, Owner]] = (None, {})


def _own_names(config: Path, defs: dg.Definitions) -> dict[str, Owner]:
    """Every asset key (`key:<path>`) and job, schedule and sensor name (`job:<name>`…) of
    `defs`, with the export it belongs to: an asset's `rivet/export` metadata; a source
    table's spec has none; a job, schedule or sensor derives its name from its export's key."""
    names: dict[str, Owner] = {}
    slugs: list[tuple[str, str]] = []
    for item in defs.assets or []:
        for spec in ([item] if isinstance(item, dg.AssetSpec) else item.specs):
            export = spec.metadata.get("rivet/export")
            names[f"key:{spec.key.to_user_string()}"] = (
                config, f"export '{export}'" if export else "the source table asset of its exports")
            if export:
                slugs.append(("__".join(spec.key.path) + "_", str(export)))
    for kind, items in (("job", defs.jobs), ("schedule", defs.schedules), ("sensor", defs.sensors)):
        for item in items or []:
            export = next((e for slug, e in slugs if item.name.startswith(slug)), None)
            names[f"{kind}:{item.name}"] = (config, f"export '{export}'" if export else "this config")
    return names


def _module_names(module: object, path: Path) -> dict[str, Owner]:
    """The asset keys and job, schedule and sensor names a Python module of the defs folder
    defines at its top level (its `Definitions` objects included)."""
    names: dict[str, Owner] = {}
    for attr, value in vars(module).items():
        inner = [value]
        if isinstance(value, dg.Definitions):
            inner = [*(value.assets or []), *(value.jobs or []), *(value.schedules or []), *(value.sensors or [])]
        for item in inner:
            what = f"`{attr}`"
            if isinstance(item, dg.AssetSpec):
                names[f"key:{item.key.to_user_string()}"] = (path, what)
            elif isinstance(item, dg.AssetsDefinition) and not isinstance(item, dg.AssetChecksDefinition):
                names.update({f"key:{k.to_user_string()}": (path, what) for k in item.keys})
            elif isinstance(item, (dg.JobDefinition, dg.ScheduleDefinition, dg.SensorDefinition)) or \
                    type(item).__name__ == "UnresolvedAssetJobDefinition":
                kind = ("schedule" if isinstance(item, dg.ScheduleDefinition) else
                        "sensor" if isinstance(item, dg.SensorDefinition) else "job")
                names[f"{kind}:{item.name}"] = (path, what)
    return names


def _project_module_names(context: dg.ComponentLoadContext) -> dict[str, Owner]:
    """`_module_names` of every Python module of the project's defs folder outside component
    folders. Importing them is what loading the folder does anyway (Dagster keeps them in
    `sys.modules`); one that fails to import is left to Dagster's own message."""
    import importlib

    root = context.defs_module_path
    names: dict[str, Owner] = {}
    for path in sorted(root.rglob("*.py")):
        folder = path.parent
        if any((d / "defs.yaml").exists() or (d / "component.yaml").exists()
               for d in [folder, *folder.parents] if root in [d, *d.parents]):
            continue
        parts = path.relative_to(root).with_suffix("").parts
        module_name = ".".join([context.defs_module_name, *(parts[:-1] if parts[-1] == "__init__" else parts)])
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # error boundary: logged here; Dagster's own load of the module reports it
            _log.debug("defs module %s did not import (%s): its names are not checked for clashes",
                       module_name, exc)
            continue
        names.update(_module_names(module, path))
    return names


def _refuse_clashes(context: dg.ComponentLoadContext, config: Path, defs: dg.Definitions,
                    source_assets: bool) -> None:
    """Refuse a name this component defines that another rivet component or a Python module
    of the defs folder defines too — naming both files and the export, and the attribute
    that resolves it — instead of Dagster's bare `Duplicate asset key` once everything merged."""
    global _defined_names
    if _defined_names[0] is not context.component_tree:
        _defined_names = (context.component_tree, {})
    ours = _own_names(config, defs)
    theirs = {**_project_module_names(context), **_defined_names[1]}
    for name, (_, what) in ours.items():
        if name in theirs and theirs[name][0] != config:
            other_file, other_what = theirs[name]
            kind, value = name.split(":", 1)
            fix = ("set `source_assets: false` on this component (the other definition stands for the "
                   "source table) or give it a `key_prefix`" if what.startswith("the source table") and source_assets
                   else "give this component a `key_prefix` (or the export a `dagster.key_prefix`), or "
                        "rename the other definition")
            raise api.ConfigError(
                f"{what} defines the {'asset key' if kind == 'key' else kind} "
                f"'{value}', which {other_what} in {other_file} defines too — {fix}")
    _defined_names[1].update(ours)


class ScaffoldParams(BaseModel):
    """`dg scaffold defs rivet_dagster.RivetExportsComponent <folder> --json-params …`."""

    source_env: str | None = Field(
        default=None, description="Environment variable holding the source URL: the config is then "
                                  "generated from the live database, as `rivet init` does.")
    schema_name: str | None = Field(default=None, alias="schema",
                                    description="Schema to introspect (default: the database's).")
    table: str | None = Field(default=None, description="Only this table.")


class RivetExportsScaffolder(dg.Scaffolder[ScaffoldParams]):
    """Writes `defs.yaml` (config: rivet.yaml) and the rivet.yaml beside it."""

    @classmethod
    def get_scaffold_params(cls) -> type[ScaffoldParams]:
        return ScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest[ScaffoldParams]) -> None:
        from dagster.components.component_scaffolding import scaffold_component

        target = Path(request.target_path)
        target.mkdir(parents=True, exist_ok=True)
        config = target / "rivet.yaml"
        params = request.params or ScaffoldParams()
        if not config.exists():
            if params.source_env:
                _generate_config(config, params)
            else:
                config.write_text(STARTER_CONFIG, encoding="utf-8")
        scaffold_component(request, {"config": "rivet.yaml"})


def _generate_config(config: Path, params: ScaffoldParams) -> None:
    """`rivet init` into `config`. A refusal (the variable unset, the database unreachable)
    becomes a one-line CLI error, and the folder `dg scaffold defs` created for it is removed
    again when it is still empty: left behind, it makes the retry fail with "already exists"."""
    import click

    try:
        api.scaffold_config(config, source_env=params.source_env or "", schema=params.schema_name,
                            table=params.table)
    except api.RivetError as exc:
        folder = config.parent
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise click.ClickException(
            f"rivet_dagster.RivetExportsComponent: cannot generate {config.name} for {folder}: {exc} "
            "— nothing was written; fix it and run the same `dg scaffold defs` again (or leave out "
            "--json-params for a commented starter rivet.yaml)") from None


@dg.scaffold_with(RivetExportsScaffolder)
class RivetExportsComponent(dg.Component, dg.Model, dg.Resolvable):
    """Rivet database exports (PostgreSQL, MySQL/MariaDB, SQLite → Parquet/CSV on local disk
    or S3) from one rivet.yaml: one asset per export with its manifest verification check,
    the source tables as upstream assets, partitions for time and chunk windows."""

    config: str = Field(description="Path of the rivet.yaml, relative to this defs.yaml's folder.")
    key_prefix: str | list[str] | None = Field(
        default=None, description="Prefix in front of every asset key (and the names derived from it).")
    group_name: str | None = Field(default=None, description="Group of every export asset.")
    owners: list[str] = Field(default_factory=list, description="Owners of every export asset.")
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on every export asset.")
    source_assets: bool = Field(
        default=True, description="Define the source tables as assets (false when another "
                                  "integration already defines them under the same keys).")
    notify_run_failures: bool = Field(
        default=False, description="Send rivet.yaml's notifications for failed runs of these exports.")
    s3_resource_key: str | None = Field(
        default=None, description="Key of the project's own dagster_aws S3Resource for the S3 "
                                  "exports (default: one built from rivet.yaml's destination fields).")
    gcs_resource_key: str | None = Field(
        default=None, description="Key of the project's own dagster_gcp GCSResource for the GCS "
                                  "exports (default: the client built from rivet.yaml's fields).")
    azure_resource_key: str | None = Field(
        default=None, description="Key of the project's own dagster_azure AzureBlobStorageResource "
                                  "(or ADLS2Resource) for the Azure exports (default: the client "
                                  "built from rivet.yaml's fields).")

    executor: str = Field(
        default="default", description="Executor of these definitions: `default` (in-process; "
                                       "RIVET_DAGSTER_EXECUTOR overrides it), `in_process`, `multiprocess`, "
                                       "`celery`, or `none` when the project's definitions.py sets its own.")

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        here = context.path if context.path.is_dir() else context.path.parent
        try:
            defs = _component_checks(build_definitions(
                self.config, relative_to=here, key_prefix=self.key_prefix or (),
                group_name=self.group_name, owners=self.owners, tags=self.tags,
                source_assets=_first_definer(context) if self.source_assets else False,
                notify_run_failures=self.notify_run_failures, s3_resource_key=self.s3_resource_key,
                gcs_resource_key=self.gcs_resource_key, azure_resource_key=self.azure_resource_key,
                executor=self.executor))
            _refuse_clashes(context, (here / self.config).resolve(), defs, self.source_assets)
            return defs
        except api.ConfigError as exc:
            # from None: Dagster prints each chained exception with its stack, so a chain
            # would show the same problems twice
            raise api.ConfigError(f"{here / 'defs.yaml'}: rivet config '{self.config}': {exc}") from None
