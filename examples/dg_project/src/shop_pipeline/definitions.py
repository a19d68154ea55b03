from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    # Loads every component (defs/*/defs.yaml) and every module under defs/. Steps run inside
    # their run's process (in_process): a rivet run is one step plus its checks, and Dagster's
    # multiprocess default would start a second interpreter for it (docs/dagster-guide.md,
    # "What a run costs").
    return dg.Definitions.merge(dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
                                dg.Definitions(executor=dg.in_process_executor))
