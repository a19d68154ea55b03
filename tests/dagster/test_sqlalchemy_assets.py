"""A `type: sqlalchemy` source in Dagster: the dialect, not "sqlalchemy", is the engine of
the source table's asset key and the `kind` tag of the source and export assets."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from rivet_dagster import build_definitions


def test_the_source_asset_key_and_kind_tags_carry_the_dialect(tmp_path: Path) -> None:
    config = tmp_path / "rivet.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"type": "sqlalchemy", "url": "duckdb:///data/shop.duckdb"},
        "exports": [{"name": "events_full", "table": "events", "mode": "full", "format": "parquet",
                     "destination": {"type": "local", "path": "out/events"}}],
    }, sort_keys=False))
    defs = build_definitions(config)
    dg.Definitions.validate_loadable(defs)
    source = dg.AssetKey(["duckdb", "shop", "events"])
    export = dg.AssetKey(["events_full"])
    assert set(defs.resolve_all_asset_keys()) == {source, export}
    graph = defs.resolve_asset_graph()
    assert graph.get(export).parent_keys == {source}
    assert set(graph.get(source).kinds) == {"duckdb"}
    assert "duckdb" in set(graph.get(export).kinds) and "sqlalchemy" not in set(graph.get(export).kinds)
