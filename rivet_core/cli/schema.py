"""`rivet schema config`: the JSON Schema of the config file, for editors and CI linters
(Rivet's `rivet schema config`; docs/rivet-compat.md "Rivet's CLI matrix").

The schema is derived from the same pydantic models the loader validates with, so it cannot
drift from what `rivet_core/config/loader.py` accepts.
"""

from __future__ import annotations

import json

import click


@click.group("schema")
def schema() -> None:
    """Print JSON Schemas of Rivet's files."""


@schema.command("config")
def schema_config() -> None:
    """The JSON Schema of rivet.yaml."""
    from rivet_core.config.models import RivetConfig

    doc = RivetConfig.model_json_schema()
    doc.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    doc.setdefault("title", "Rivet config (rivet.yaml)")
    click.echo(json.dumps(doc, indent=2, sort_keys=True))
