"""`python -m tests.distributed.run_job chunks|manifest [PARTITION]`: one Dagster run of the
test code location (location.py) on the instance of $DAGSTER_HOME, in THIS process as the run
orchestrator; prints {"success", "run_id", "errors"} as JSON. The manifest-race test starts two
of these at once."""

from __future__ import annotations

import json
import sys

import dagster as dg

from tests.distributed import location


def step_errors(result: dg.ExecuteJobResult) -> list[str]:
    out = []
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            user = data.user_failure_data
            out.append((user.description if user and user.description else "") or
                       (data.error.message if data.error else ""))
    return out


def execute(which: str, partition: str | None = None) -> dict:
    factory = {"chunks": location.chunk_job, "manifest": location.manifest_job}[which]
    tags = {"dagster/partition": partition} if partition else {}
    with dg.DagsterInstance.get() as instance:
        with dg.execute_job(dg.reconstructable(factory), instance=instance, tags=tags,
                            raise_on_error=False) as result:
            return {"success": result.success, "run_id": result.run_id, "errors": step_errors(result)}


if __name__ == "__main__":
    print(json.dumps(execute(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)))
