"""The chunk-task protocol speaks neutral words in the core and Dagster's in rivet_dagster
(issue 18 item 5). No server: the refusals are built from their facts, as the core raises them.

- Every refusal kind the core raises has a Dagster wording (`not_chunked` reads the same in
  both), and the Dagster text is the one users saw before the protocol moved (the literal
  strings below were copied from the Dagster-worded core module).
- The core's neutral text names no orchestrator concept.
"""

from __future__ import annotations

import re

import pytest

from rivet_core import api
from rivet_core.config import ExportConfig
from rivet_core.state import ChunkTaskRow
from rivet_dagster.chunk_words import dagster_chunk_problem, dagster_words

DAGSTER_TERMS = re.compile(r"dagster|asset|materiali[sz]|sensor|partition|_manifest`|_planner`", re.I)


def _task(key: str) -> ChunkTaskRow:
    return ChunkTaskRow(run_id="orders_r1", chunk_index=0, start_key=None, end_key=None, window_key=key,
                        status="pending", attempts=0, last_error=None, rows_written=None, file_name=None,
                        updated_at="2026-12-01T00:00:00Z")


FACTS = {"export": "orders", "run_id": "orders_r1", "window": "id_1-2", "status": "running", "owner": " by w1",
         "worker": "w2", "plan_hash": "h2", "run_plan_hash": "h1", "config": "/c/rivet.yaml", "keys": "id_9"}

def _refusal(name: str):  # noqa: ANN202
    return next(c for c in api.ChunkTaskRefusal.__subclasses__() if c.__name__ == name)


CASES = [
    ("ChunkTaskBusy", FACTS,
     "export 'orders': window id_1-2 is running by w1 and cannot be claimed by w2 (chunk run orders_r1) — wait "
     "for that run, or cancel it and materialize the partition again"),
    ("ChunkPlanChanged", FACTS,
     "export 'orders': the config now plans h2 but the chunk run orders_r1 in progress was planned as h1 (the "
     "query, chunk column or chunk shape changed), so its partitions no longer name the same rows. Restore the "
     "old settings, or clear the checkpoint with `rivet state reset-chunks -c /c/rivet.yaml -e orders` (the "
     "next planner tick starts a fresh chunk run)"),
    ("UnknownWindows", FACTS,
     "export 'orders': partition(s) id_9 are not windows of chunk run orders_r1 (registered by an older plan?) "
     "— let the config's `…_chunk_planner` sensor register the current windows"),
    ("WindowPartsLost", FACTS,
     "export 'orders': window id_1-2 lost its part(s) at the destination while the manifest was being built — "
     "materialize that partition again"),
    ("FinalizedElsewhere", {**FACTS, "status": "completed"},
     "export 'orders': chunk run orders_r1 is completed — another `orders_manifest` run finalized it (or a "
     "reset removed it) meanwhile; this run published nothing"),
    ("NoChunkRun", FACTS,
     "export 'orders': no chunk run recorded — let the config's `…_chunk_planner` sensor plan the windows and "
     "materialize them first"),
]


@pytest.mark.parametrize(("name", "facts", "dagster_text"), CASES, ids=[c[0] for c in CASES])
def test_each_refusal_reads_neutral_in_the_core_and_as_before_in_dagster(name, facts, dagster_text) -> None:  # noqa: ANN001
    cls = _refusal(name)
    neutral, worded = cls(facts), cls(facts, words=dagster_words)
    assert str(worded) == dagster_text
    assert not DAGSTER_TERMS.search(str(neutral)), str(neutral)
    assert type(worded) is cls and worded.kind == neutral.kind and worded.facts == facts


def test_windows_missing_keeps_its_keys_and_wording() -> None:
    tasks = [_task("id_1-2"), _task("id_3-4")]
    worded = api.ChunkWindowsMissing("orders", "orders_r1", tasks, 6, {"id_1-2": "its part is missing"},
                                     words=dagster_words)
    assert str(worded) == (
        "export 'orders': 2 of 6 chunk window(s) not materialized (chunk run orders_r1) — nothing was published; "
        "materialize partition(s) id_1-2, id_3-4 of the chunk asset, then `orders_manifest` again "
        "(id_1-2: its part is missing). A window is a partition once the config's `…_chunk_planner` sensor "
        "has registered it: run the sensor under `dagster dev`, `dg dev` or a dagster-daemon "
        "(`dg launch` alone runs no sensor)")
    neutral = api.ChunkWindowsMissing("orders", "orders_r1", tasks, 6)
    assert not DAGSTER_TERMS.search(str(neutral)) and "2 of 6 chunk window(s) not completed" in str(neutral)
    assert worded.missing_keys == neutral.missing_keys == ["id_1-2", "id_3-4"] and worded.total == 6
    assert isinstance(worded, api.DataIntegrityError)


def test_every_refusal_kind_has_a_dagster_wording() -> None:
    kinds = {c.kind for c in api.ChunkTaskRefusal.__subclasses__()}
    assert len(kinds) == 7 and all(dagster_words(k, {**FACTS, "missing": 1, "total": 1, "shown": "x", "detail": "",
                                                     "status": "s", "why": "w"}) for k in kinds)
    assert dagster_words("finalize_due_again", {"export": "orders", "run_id": "r", "why": "its finalize failed"}) \
        .endswith("the manifest is requested again")


def _export(**fields) -> ExportConfig:  # noqa: ANN003
    return ExportConfig.model_validate({"name": "orders", "query": "SELECT 1", "mode": "chunked",
                                        "format": "parquet", "destination": {"type": "local", "path": "/tmp/x"},
                                        **fields})


@pytest.mark.parametrize(("fields", "dagster_text"), [
    ({"chunk_column": "id", "chunk_count": 4},
     "export 'orders': chunk_count windows depend on the table's current extent and change as it grows, so they "
     "cannot be Dagster partitions (a partition key must name the same rows forever) — use chunk_column + "
     "chunk_size (grid-aligned), chunk_by_days or chunk_by_key, or run this export with the CLI"),
    ({"mode": "full"}, "export 'orders' is mode 'full', not chunked"),
], ids=["moving_windows", "not_chunked"])
def test_the_config_problem_is_worded_for_dagster_and_neutral_in_the_core(fields, dagster_text) -> None:  # noqa: ANN001
    export = _export(**fields)
    assert dagster_chunk_problem(export) == dagster_text
    neutral = api.chunk_task_problem(export)
    assert neutral is not None and not DAGSTER_TERMS.search(neutral)
