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
    from rivet_core import api, plan

    assert api.export_destination is plan.export_destination
    assert api.partition_prefixes is plan.partition_prefixes
