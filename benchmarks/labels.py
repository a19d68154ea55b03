"""Names the benchmark's runner (harness.py) and its report (report.py) share: the client
floor per engine, the engines' display names and the slow peers with their reduced rounds.
A module of its own so the report never imports the runner that calls it."""

from __future__ import annotations

import argparse

CLIENT_FLOOR = {"pg": "floor_psql_copy", "mysql": "floor_mariadb_client"}
ENGINE_LABEL = {"pg": "PostgreSQL", "mysql": "MariaDB"}

#: Peers several times slower than the floor at every scale measured (docs/benchmarks.md):
#: fewer rounds for them (`--slow-repeat`) cannot change a ranking, and saves most of a run.
SLOW_METHODS = frozenset({"dlt_pyarrow", "pandas_read_sql"})


def slow_repeat(args: argparse.Namespace) -> int:
    value = getattr(args, "slow_repeat", None)
    return args.repeat if value is None else max(1, min(value, args.repeat))
