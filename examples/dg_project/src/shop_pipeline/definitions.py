from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    # Loads every component (defs/*/defs.yaml) and every module under defs/.
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
