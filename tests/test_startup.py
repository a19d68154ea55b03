"""CLI start-up stays light: `rivet` must not import the heavy libraries it does not need.

Every `rivet` process (and the test suite spawns hundreds) pays for what `rivet_core.cli`
imports at load time. The engine's heavy dependencies are imported by the commands that
use them, so these checks are structural — which modules a fresh interpreter has loaded —
never wall-clock timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import REPO, write_config

#: Not needed to parse the command line, print help, or open the state store.
HEAVY = ("pyarrow", "pandas", "numpy", "boto3", "botocore", "sqlalchemy", "psycopg", "pymysql")


def _loaded_after(code: str, cwd: Path = REPO) -> set[str]:
    """The HEAVY top-level packages a fresh interpreter has imported after running `code`."""
    probe = code + textwrap.dedent(f"""
        import json, sys
        print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=cwd,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_imports_no_heavy_library() -> None:
    assert _loaded_after("import rivet_core.cli\n") == set()


def test_help_imports_no_heavy_library() -> None:
    code = textwrap.dedent("""
        import contextlib, io, sys
        from rivet_core.cli import main
        for args in (["--help"], ["init", "--help"], ["check", "--help"], ["state", "--help"]):
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    main(args)
                except SystemExit as exc:
                    assert exc.code == 0, (args, exc.code)
    """)
    assert _loaded_after(code) == set()


def test_loading_a_config_without_overrides_imports_no_arrow(tmp_path: Path) -> None:
    """`rivet state`, `metrics` and `journal` load the config and open the state store only."""
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{tmp_path / 'src.db'}"},
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": "out"}}])
    code = f"from rivet_core.config import load_config\nload_config({str(config)!r}, {{}})\n"
    assert _loaded_after(code) == set()
    code += f"from rivet_core.state import StateStore\nStateStore.open({str(config)!r}).close()\n"
    assert _loaded_after(code) == {"sqlalchemy"}


def test_column_overrides_still_map_to_arrow_types() -> None:
    import pyarrow as pa

    from rivet_core.config.overrides import ACCEPTED_TYPES, parse_column_override

    assert parse_column_override("BIGINT") == pa.int64()
    assert parse_column_override("timestamptz") == pa.timestamp("us", "UTC")
    assert parse_column_override("jsonb") == pa.json_(pa.string())
    assert parse_column_override("decimal(40, 2)") == pa.decimal256(40, 2)
    assert ACCEPTED_TYPES[:4] == ("decimal(p,s)", "numeric(p,s)", "bool", "boolean")
    assert ACCEPTED_TYPES[-1] == "timestamp_tz_ns"


def test_api_keeps_exporting_the_destination_helpers() -> None:
    from rivet_core import api
    from rivet_core.unit import resolve as unit

    assert api.export_destination is unit.export_destination
    assert api.partition_prefixes is unit.partition_prefixes


#: Never needed by `rivet run` of a Parquet export to a local destination (issue 16 items
#: 2–3): pandas alone cost ~0.5 s of start-up and ~40 MB of peak RSS on that path.
NOT_ON_RUN_PATH = ("pandas", "dagster", "duckdb", "boto3", "botocore", "google", "azure", "polars")


def test_a_parquet_export_imports_no_pandas_dagster_or_cloud_sdk(tmp_path: Path, pg_url: str) -> None:
    """The whole run path, not just its imports: pyarrow imports pandas as soon as an array or
    scalar is built from Python values, so a stray `pa.scalar(...)` anywhere on the path would
    bring it back. Checked in a fresh interpreter that ran a real export."""
    import pyarrow.parquet as pq

    from tests.helpers import data_files, pg_exec, source_block

    pg_exec(pg_url, "CREATE TABLE t (id bigint PRIMARY KEY, note text, amount numeric(12,2), "
                    "at timestamptz, payload jsonb, ext uuid, ok boolean)",
            "INSERT INTO t SELECT g, 'n' || g, g / 100.0, now(), jsonb_build_object('g', g), "
            "md5(g::text)::uuid, g % 2 = 0 FROM generate_series(1, 500) g")
    out = tmp_path / "out"
    config = write_config(tmp_path, source_block(pg_url),
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": str(out)}}])
    code = textwrap.dedent(f"""
        import json, sys
        from rivet_core.cli import main
        try:
            main(["run", "-c", {str(config)!r}, "-e", "t"])
        except SystemExit as exc:
            assert exc.code in (0, None), exc.code
        print(json.dumps(sorted(m for m in {NOT_ON_RUN_PATH!r} if m in sys.modules)))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
    [part] = data_files(out)
    assert sorted(pq.read_table(part).column("id").to_pylist()) == list(range(1, 501))
