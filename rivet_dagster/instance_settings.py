"""The Dagster instance settings rivet's recoveries need, and the `rivet doctor` check that a
user's instance (`$DAGSTER_HOME/dagster.yaml`) has them (docs/dagster-guide.md, "The
instance"; docs/operations.md, "When a Dagster run dies or is terminated").

- `run_monitoring.enabled: true`: the daemon watches runs, so a run stuck starting (or, with
  a launcher that can tell, whose worker died) is marked failed — its chunk windows are then
  taken over by the planner (rivet_dagster/chunked.py `worker_gone`).
- `run_monitoring.free_slots_after_run_end_seconds`: the same daemon frees the pool slots
  that a run which ended without releasing them (its worker killed, a backfill cancelled
  before its steps started) still holds, this many seconds after it ended. Without it those
  slots stay claimed forever and every later run of an export of that source (pool
  `source_<database>`) sits QUEUED. Dagster reads it only when it is a positive integer.

Imported by the `dagster:` config block (config_block.py) when `rivet doctor` runs, so it stays as light as the
config loader: the standard library and PyYAML, never Dagster.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

#: What the shipped dagster_home/dagster.yaml sets: a run that ended more than this many
#: seconds ago holds no slot (a run that ends normally frees its own at once).
FREE_SLOTS_AFTER_RUN_END_SECONDS = 10

#: The lines to add, as the fix of the doctor check says them.
SETTINGS_YAML = ("run_monitoring: {enabled: true, free_slots_after_run_end_seconds: "
                 f"{FREE_SLOTS_AFTER_RUN_END_SECONDS}}}")

CHECK_NAME = "dagster instance"


def instance_problems(settings: Any) -> list[str]:
    """What the instance settings (a parsed dagster.yaml) lack for rivet's recoveries."""
    monitoring = settings.get("run_monitoring") if isinstance(settings, dict) else None
    monitoring = monitoring if isinstance(monitoring, dict) else {}
    problems = []
    if monitoring.get("enabled") is not True:
        problems.append("run_monitoring.enabled is not true (a run stuck starting is never marked failed, so "
                        "its chunk windows are not taken over)")
    free = monitoring.get("free_slots_after_run_end_seconds")
    if not isinstance(free, int) or isinstance(free, bool) or free <= 0:
        problems.append("run_monitoring.free_slots_after_run_end_seconds is not set to a positive number of "
                        "seconds (the pool slots of a killed or cancelled run are never freed, and every later "
                        "run of an export of that source queues forever)")
    return problems


def doctor_checks(config: Any) -> list[tuple[str, bool, str, str | None]]:
    """`rivet doctor`'s check of the Dagster instance named by DAGSTER_HOME (ConfigBlock
    `doctor_checks`): (name, ok, detail, fix)."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return [(CHECK_NAME, True, "DAGSTER_HOME is not set here, so no instance to check — run `rivet doctor` "
                                   "with the DAGSTER_HOME of the Dagster daemon to check its dagster.yaml", None)]
    path = Path(home) / "dagster.yaml"
    fix = f"add to {path}: {SETTINGS_YAML} (docs/dagster-guide.md, \"The instance\"), then restart the daemon"
    try:
        settings = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return [(CHECK_NAME, False, f"{path} does not exist: Dagster's defaults leave run monitoring off and the "
                                    "pool slots of a killed run held forever", fix)]
    except (OSError, yaml.YAMLError) as exc:
        return [(CHECK_NAME, False, f"{path} cannot be read: {exc}", f"make {path} readable YAML")]
    problems = instance_problems(settings)
    if problems:
        return [(CHECK_NAME, False, f"{path}: " + "; ".join(problems), fix)]
    return [(CHECK_NAME, True, f"{path} enables run monitoring and frees the slots of ended runs", None)]
