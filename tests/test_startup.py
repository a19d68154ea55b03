"""CLI start-up stays light: `rivet` must not import the heavy libraries it does not need.

Every `rivet` process (and the test suite spawns hundreds) pays for what `rivet_core.cli`
imports at load time. The engine's heavy dependencies are imported by the commands that
use them, so these checks are structural — which modules a fresh interpreter has loaded —
never wall-clock timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, write_config

#: Not needed to parse the command line, print help, or open the state store.
HEAVY = ("pyarrow", "pandas", "numpy", "boto3", "botocore", "sqlalchemy", "psycopg", "pymysql")


def _pg_full_export(tmp_path: Path, pg_url: str, *statements: str, state_url: str | None = None) -> tuple[Path, Path]:
    """Table `t` made by `statements`, a full Parquet export `t` of it to `<tmp>/out`, and its
    state store (beside the config, or at `state_url`) already created (as on every run but
    the first); (config path, output dir)."""
    from rivet_core.state import StateStore
    from tests.helpers import pg_exec, source_block

    pg_exec(pg_url, *statements)
    out = tmp_path / "out"
    config = write_config(tmp_path, source_block(pg_url),
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": str(out)}}])
    StateStore.open(config, state_url=state_url).close()
    return config, out


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


def _modules_after(code: str, prefixes: tuple[str, ...]) -> set[str]:
    """The modules starting with one of `prefixes` a fresh interpreter has after `code`."""
    probe = code + textwrap.dedent(f"""
        import json, sys
        print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_command_imports_its_own_module_and_not_the_other_commands(tmp_path: Path) -> None:
    """The `rivet` group is lazy (cli/app.py): `rivet state` loads cli/state.py only, while
    `--help` still lists every command."""
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{tmp_path / 'src.db'}"},
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": "out"}}])
    code = textwrap.dedent(f"""
        import contextlib, io
        from rivet_core.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                main(["state", "show", "-c", {str(config)!r}])
            except SystemExit as exc:
                assert exc.code == 0, exc.code
    """)
    commands = {"run", "validate", "reconcile", "state", "history", "init", "check", "plan", "doctor", "gc"}
    loaded = _modules_after(code, ("rivet_core.cli.",))
    assert {m.rsplit(".", 1)[1] for m in loaded} & commands == {"state"}
    from click.testing import CliRunner

    from rivet_core.cli import main
    listed = CliRunner().invoke(main, ["--help"]).output
    for name in ("run", "validate", "reconcile", "repair", "state", "metrics", "journal", "init", "check", "plan",
                 "apply", "doctor", "gc"):
        assert f"\n  {name} " in listed, name


def test_a_config_without_integration_keys_reads_no_entry_points(tmp_path: Path) -> None:
    """Entry points are read (and integration blocks loaded) only for a config that names a
    key the core does not know (rivet_core/config/blocks.py `blocks_for`)."""
    db = f"sqlite:///{tmp_path / 'src.db'}"
    for folder in ("plain", "block"):
        (tmp_path / folder).mkdir()
    plain = write_config(tmp_path / "plain", {"type": "sqlite", "url": db},
                         [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                           "destination": {"type": "local", "path": "out"}}])
    load = f"from rivet_core.config import load_config\ncfg = load_config({str(plain)!r})\n"
    assert _modules_after(load, ("rivet_dagster",)) == set()
    assert _modules_after(load + "assert cfg.exports[0].integration('dagster') is None\n",
                          ("rivet_dagster",)) == {"rivet_dagster", "rivet_dagster.config_block"}
    with_block = write_config(tmp_path / "block", {"type": "sqlite", "url": db},
                              [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                                "destination": {"type": "local", "path": "out"},
                                "dagster": {"schedule": "0 3 * * *"}}])
    code = (f"from rivet_core.config import load_config\ncfg = load_config({str(with_block)!r})\n"
            "assert cfg.exports[0].integration('dagster').schedule == '0 3 * * *'\n"
            f"assert load_config({str(plain)!r}).exports[0].integration('dagster') is None\n")
    assert "rivet_dagster.config_block" in _modules_after(code, ("rivet_dagster",))


def _console_loaded_plugin(config: Path, plugins: Path, **env: str) -> bool:
    """Whether `rivet validate -c config`, run through the console script's entry with the
    pydantic plugin distribution in `plugins` on the path, imported that plugin (reported by
    an atexit handler: the entry leaves with `os._exit` after running them)."""
    code = textwrap.dedent(f"""
        import atexit, json, sys
        atexit.register(lambda: print(json.dumps("probe_plugin" in sys.modules)))
        sys.argv = ["rivet", "validate", "-c", {str(config)!r}]
        from rivet_core.cli.entry import console
        console()
    """)
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    base["PYTHONPATH"] = os.pathsep.join([str(plugins), str(REPO)])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                            timeout=120, env={**base, **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return bool(json.loads(result.stdout.strip().splitlines()[-1]))


def test_the_console_skips_pydantics_plugin_scan_unless_told_otherwise(tmp_path: Path) -> None:
    """Pydantic reads every installed distribution's entry points for plugins when the first
    model is built; the `rivet` command turns that off (cli/entry.py). A real plugin
    distribution on the path shows it: not loaded by default, loaded when the user sets
    PYDANTIC_DISABLE_PLUGINS themselves (empty: every plugin)."""
    plugins = tmp_path / "plugins"
    (plugins / "probe_plugin-1.0.dist-info").mkdir(parents=True)
    (plugins / "probe_plugin.py").write_text(
        "class Plugin:\n    def new_schema_validator(self, *args, **kwargs):\n        return None, None, None\n"
        "plugin = Plugin()\n")
    (plugins / "probe_plugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\n"
                                                                     "Version: 1.0\n")
    (plugins / "probe_plugin-1.0.dist-info" / "entry_points.txt").write_text("[pydantic]\nprobe = probe_plugin:plugin\n")
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{tmp_path / 'src.db'}"},
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": "out"}}])
    assert _console_loaded_plugin(config, plugins) is False
    assert _console_loaded_plugin(config, plugins, PYDANTIC_DISABLE_PLUGINS="") is True


def test_loading_a_config_without_overrides_imports_no_arrow(tmp_path: Path) -> None:
    """`rivet state`, `metrics` and `journal` load the config and open the state store only."""
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{tmp_path / 'src.db'}"},
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": "out"}}])
    code = f"from rivet_core.config import load_config\nload_config({str(config)!r}, {{}})\n"
    assert _loaded_after(code) == set()
    code += f"from rivet_core.state import StateStore\nStateStore.open({str(config)!r}).close()\n"
    assert _loaded_after(code) == set()


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
#: 2–3): pandas alone cost ~0.5 s of start-up and ~40 MB of peak RSS on that path; SQLAlchemy
#: (~0.15 s) is used by no part of rivet_core — the state store speaks sqlite3 and psycopg
#: (state/database.py); the chunked runner (pipeline/chunked/) and its planning for `mode: chunked`
#: only (pipeline/runner.py).
NOT_ON_RUN_PATH = ("pandas", "dagster", "duckdb", "boto3", "botocore", "google", "azure", "polars",
                   "sqlalchemy", "rivet_core.pipeline.chunked", "rivet_core.chunks")


def test_a_parquet_export_imports_no_pandas_dagster_or_cloud_sdk(tmp_path: Path, pg_url: str) -> None:
    """The whole run path, not just its imports: pyarrow imports pandas as soon as an array or
    scalar is built from Python values, so a stray `pa.scalar(...)` anywhere on the path would
    bring it back. Checked in a fresh interpreter that ran a real export."""
    import pyarrow.parquet as pq

    from tests.helpers import data_files

    config, out = _pg_full_export(
        tmp_path, pg_url,
        "CREATE TABLE t (id bigint PRIMARY KEY, note text, amount numeric(12,2), "
        "at timestamptz, payload jsonb, ext uuid, ok boolean)",
        "INSERT INTO t SELECT g, 'n' || g, g / 100.0, now(), jsonb_build_object('g', g), "
        "md5(g::text)::uuid, g % 2 = 0 FROM generate_series(1, 500) g")
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


# ------------------------------------------------------------ state store open (issue 16 item 3)

def _statements_of_open(config: Path, state_url: str | None = None) -> list[str]:
    """Every SQL statement `StateStore.open` sends through the store's SQL layer
    (state/database.py `Transaction.execute`; BEGIN/COMMIT and the SQLite connection's
    PRAGMAs are the layer's own and not listed)."""
    from rivet_core.state import StateStore
    from rivet_core.state.database import Transaction

    sent: list[str] = []
    execute = Transaction.execute

    def record(self: Transaction, sql: str, params: object = None) -> object:
        sent.append(" ".join(sql.split()))
        return execute(self, sql, params)  # type: ignore[arg-type]

    Transaction.execute = record  # type: ignore[method-assign]
    try:
        StateStore.open(config, state_url=state_url).close()
    finally:
        Transaction.execute = execute  # type: ignore[method-assign]
    return sent


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_opening_a_current_state_store_reads_its_version_once_and_nothing_else(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `rivet` process opens the store; once it is at SCHEMA_VERSION, the open is one
    SELECT — no table-existence check, no DDL, no advisory lock (state/migrations.py)."""
    from rivet_core.state import SCHEMA_VERSION, StateStore
    from rivet_core.state.migrations import VERSION_QUERY

    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    config = tmp_path / "rivet.yaml"
    first = _statements_of_open(config, url)  # a new store: the whole ladder
    assert any(s.startswith("CREATE TABLE") for s in first)
    assert _statements_of_open(config, url) == [VERSION_QUERY]
    assert VERSION_QUERY == "SELECT max(version) AS version FROM rivet_schema_version"
    store = StateStore.open(config, state_url=url)
    try:
        with store.database.transaction() as tx:
            assert tx.execute(VERSION_QUERY).scalar() == SCHEMA_VERSION
    finally:
        store.close()


def _bare(sql: str) -> str:
    """An index definition without the parentheses and casts PostgreSQL adds to it."""
    return sql.replace("(", "").replace(")", "").replace("::text", "")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_new_state_store_still_gets_its_partial_unique_indexes(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store created by the migrations has the two partial unique indexes (state/schema.py),
    with their WHERE clause: they, not a pre-check, keep one running projection per run and
    one in-progress chunk run per export."""
    from rivet_core.state import StateStore

    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    store = StateStore.open(tmp_path / "rivet.yaml", state_url=url)
    try:
        with store.database.transaction() as tx:
            if backend == "sqlite":
                rows = tx.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").all()
            else:
                rows = tx.execute("SELECT indexname AS name, indexdef AS sql FROM pg_indexes").all()
        found = {r["name"]: " ".join(r["sql"].split()) for r in rows if r["sql"]}
        assert "UNIQUE" in found["export_metrics_one_running_per_run"]
        assert "status = 'running'" in _bare(found["export_metrics_one_running_per_run"])
        assert "UNIQUE" in found["idx_chunk_run_one_inprogress"]
        assert "status = 'in_progress'" in _bare(found["idx_chunk_run_one_inprogress"])
    finally:
        store.close()


def test_a_sqlite_state_store_loads_neither_sqlalchemy_nor_psycopg(tmp_path: Path) -> None:
    """Importing the state package and opening an existing SQLite store needs the stdlib's
    sqlite3 only (state/database.py): no SQLAlchemy, and psycopg is for a PostgreSQL store."""
    config = tmp_path / "rivet.yaml"
    from rivet_core.state import StateStore

    StateStore.open(config).close()  # created (and migrated) here, not in the probe
    code = ("import sys\nfrom rivet_core.state import StateStore\n"
            f"StateStore.open({str(config)!r}).close()\n"
            "import json\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('sqlalchemy', 'psycopg', 'sqlite3'))))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded and all(m.startswith("sqlite3") for m in loaded), loaded


# ------------------------------------------------- first source query before Arrow (issue 16 item 3)

#: Loaded by a run, but not before its first source query: Arrow and NumPy (the source's
#: types are mapped to Arrow once it answered), the finalize facade and the table-format
#: code (imported by the phases that use them, pipeline/single/job.py).
AFTER_FIRST_QUERY = ("numpy", "pyarrow", "rivet_core.pipeline.facade.finalize", "rivet_core.tableformat")

#: Probe run in a fresh interpreter: wraps psycopg's `execute` and records, at the first
#: statement on the SOURCE connection (application_name `rivet`, rivet_core/source/postgres/
#: session.py), which of the `watch` modules were loaded and how many statements the state
#: store had sent by then on psycopg (a PostgreSQL store); then runs `rivet run` in-process
#: and records the `watch` modules loaded at its end.
_FIRST_SOURCE_QUERY_PROBE = """
import json, sys
import psycopg

seen = {{"state_statements": 0}}
for cls in (psycopg.Cursor, psycopg.ServerCursor):
    def execute(self, *args, _orig=cls.execute, **kwargs):
        if self.connection.info.parameter_status("application_name") != "rivet":
            seen["state_statements"] += 1
        elif "first_source_query" not in seen:
            seen["first_source_query"] = {{"loaded": sorted(m for m in {watch!r} if m in sys.modules),
                                          "state_statements": seen["state_statements"]}}
        return _orig(self, *args, **kwargs)
    cls.execute = execute
from rivet_core.cli import main
try:
    main(["run", "-c", {config!r}, "-e", "t"])
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
seen["loaded_at_exit"] = sorted(m for m in {watch!r} if m in sys.modules)
print(json.dumps(seen))
"""


def _probe(config: Path, watch: tuple[str, ...], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """What `_FIRST_SOURCE_QUERY_PROBE` saw of a real `rivet run` of `config`."""
    result = subprocess.run([sys.executable, "-c", _FIRST_SOURCE_QUERY_PROBE.format(config=str(config), watch=watch)],
                            capture_output=True, text=True, cwd=cwd, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_first_source_query_is_sent_before_pyarrow_is_imported(tmp_path: Path, pg_url: str) -> None:
    """`rivet run` locks the export and connects before it handles an Arrow value, so Arrow
    and NumPy (~150 modules, ~0.25 s of CPU) load after the source saw its first statement:
    the modules on that path name them through rivet_core/lazy_modules.py. A module-level
    `pa.int64()` (or an eager `import pyarrow`) on the path would import them up front."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.helpers import data_files

    config, out = _pg_full_export(
        tmp_path, pg_url, "CREATE TABLE t (id bigint PRIMARY KEY, note text, amount numeric(12,2), at timestamptz)",
        "INSERT INTO t SELECT g, 'n' || g, g / 100.0, now() FROM generate_series(1, 200) g")
    seen = _probe(config, AFTER_FIRST_QUERY, tmp_path)
    assert seen["first_source_query"]["loaded"] == [], seen  # nothing Arrow before the source's first statement
    assert seen["loaded_at_exit"] == sorted(AFTER_FIRST_QUERY), seen  # the probe saw the run load them
    [part] = data_files(out)
    table = pq.read_table(part)
    assert sorted(table.column("id").to_pylist()) == list(range(1, 201))
    assert table.column("amount").type == pa.decimal128(12, 2)


# ------------------------------------------- first source query without SQLAlchemy (issue 16 item 3)

@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_first_source_query_is_sent_without_sqlalchemy_loaded(
        backend: str, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rivet run` takes the export lock in the state store before its first source query
    (pipeline/single/job.py), so the store's library is on the start-up path: it is the stdlib's
    sqlite3 or psycopg (state/database.py), never SQLAlchemy (~0.15 s of imports) — with the
    SQLite store beside the config and with a PostgreSQL store from RIVET_STATE_URL. A stray
    `import sqlalchemy` anywhere on the path would load it before the source saw a statement."""
    import pyarrow.parquet as pq

    from tests.helpers import data_files

    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    state_url = pg_url if backend == "postgresql" else None
    config, out = _pg_full_export(
        tmp_path, pg_url, "CREATE TABLE t (id bigint PRIMARY KEY, note text)",
        "INSERT INTO t SELECT g, 'n' || g FROM generate_series(1, 100) g", state_url=state_url)
    env = {**os.environ, **({"RIVET_STATE_URL": state_url} if state_url else {})}
    seen = _probe(config, ("sqlalchemy",), tmp_path, env)
    assert seen["first_source_query"]["loaded"] == [], seen  # no SQLAlchemy before the source's first statement
    assert seen["loaded_at_exit"] == [], seen
    if backend == "postgresql":  # the store was really on psycopg, and locked the export first
        assert seen["first_source_query"]["state_statements"] > 0, seen
    else:
        assert seen["state_statements"] == 0, seen
    [part] = data_files(out)
    assert sorted(pq.read_table(part).column("id").to_pylist()) == list(range(1, 101))


# ------------------------------------------------ the lock's process identity without psutil

def test_a_run_locks_and_claims_its_staging_without_psutil(tmp_path: Path, pg_url: str) -> None:
    """The run records its own pid and start time in the lock row and the staging owner file
    before its first source query; on Linux that reads /proc (state/process_identity.py), so
    psutil (~11 ms of imports) is loaded neither then nor later in a healthy run (that the
    value equals psutil's: tests/state/test_process_identity.py)."""
    import pyarrow.parquet as pq

    from tests.helpers import data_files

    config, out = _pg_full_export(
        tmp_path, pg_url, "CREATE TABLE t (id bigint PRIMARY KEY, note text)",
        "INSERT INTO t SELECT g, 'n' || g FROM generate_series(1, 50) g")
    seen = _probe(config, ("psutil",), tmp_path)
    assert seen["first_source_query"]["loaded"] == [], seen
    assert seen["loaded_at_exit"] == [], seen
    assert sorted(pq.read_table(data_files(out)[0]).column("id").to_pylist()) == list(range(1, 51))
