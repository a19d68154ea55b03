"""The fast readers' private driver APIs (issue 37): each driver's internals are touched by
one adapter only (rivet_core/source/postgres/libpq_access.py for psycopg and its libpq,
rivet_core/source/mysql/wire.py for PyMySQL); every adapter function works against the real
server on the locked release and on the oldest release pyproject.toml admits (that run
installs it into a throwaway venv and runs this module there); and a driver that moved
makes the run say so once, loudly, naming the version, while the export stays exact.

The "moved driver" is the real driver with one internal removed (or its version changed)
by a `sitecustomize` before rivet imports it, in a `rivet` subprocess against the real
server — not a mock of the database.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pymysql
import pymysql.cursors
import pytest
from pymysql.constants import COMMAND

from rivet_core.source.mysql import binary as mysql_binary
from rivet_core.source.mysql import raw as mysql_raw
from rivet_core.source.mysql import wire
from rivet_core.source.postgres import binary as pg_binary
from rivet_core.source.postgres import libpq_access
from tests.helpers import (
    REPO,
    data_files,
    db_exec,
    read_table,
    source_block,
    write_config,
)

ADAPTERS = {"rivet_core/source/postgres/libpq_access.py", "rivet_core/source/mysql/wire.py"}
DRIVERS = ("psycopg", "psycopg_binary", "pymysql", "adbc_driver_manager", "adbc_driver_postgresql")
#: Set by the oldest-release run: the releases this process must be running on.
EXPECT_ENV = "RIVET_CONTRACT_EXPECT"


# --------------------------------------------------------------------------- the scan
def _driver_private_names() -> set[str]:
    """Every `_name` (not dunder) the drivers define: their functions, classes and the
    attributes their methods set on `self` — what `x._name` on a driver object would be."""
    names: set[str] = set()
    for package in ("psycopg", "pymysql"):
        base = Path(importlib.import_module(package).__file__ or "").parent
        for path in base.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    name = node.attr
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = node.name
                else:
                    continue
                if name.startswith("_") and not name.startswith("__"):
                    names.add(name)
    return names


def _private_import(node: ast.AST) -> str | None:
    """`from psycopg.pq import _pq_ctypes`, `import pymysql._auth`, `from psycopg._x import y`."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in DRIVERS:
        if any(part.startswith("_") for part in node.module.split(".")):
            return f"from {node.module} import …"
        hidden = [a.name for a in node.names if a.name.startswith("_")]
        return f"from {node.module} import {', '.join(hidden)}" if hidden else None
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] in DRIVERS and any(p.startswith("_") for p in parts):
                return f"import {alias.name}"
    return None


def _private_access(node: ast.AST, private: set[str], stdlib: set[str]) -> str | None:
    """`obj._name` (obj not `self`/`cls`, not an imported stdlib module) or `getattr(obj, "_name")`."""
    if isinstance(node, ast.Attribute) and node.attr in private:
        base = node.value
        if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in stdlib):
            return None
        return ast.unparse(node)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and node.args[1].value in private):
        return ast.unparse(node)
    return None


def _stdlib_imports(tree: ast.Module) -> set[str]:
    """Names a module binds to standard-library modules (`import os` → os): `os._exit` is no
    driver's."""
    return {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names if alias.name.split(".")[0] in sys.stdlib_module_names}


def driver_private_uses(root: Path) -> list[str]:
    """Every private driver touch in rivet_core/**/*.py outside the two adapters."""
    private = _driver_private_names()
    found: list[tuple[str, int, str]] = []
    for path in sorted((root / "rivet_core").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative in ADAPTERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stdlib = _stdlib_imports(tree)
        for node in ast.walk(tree):
            what = _private_import(node) or _private_access(node, private, stdlib)
            if what:
                found.append((relative, getattr(node, "lineno", 0), what))
    return [f"{relative}:{line}: {what}" for relative, line, what in sorted(found)]


def test_no_module_but_the_two_adapters_touches_a_private_driver_api() -> None:
    found = driver_private_uses(REPO)
    assert not found, ("private driver APIs outside rivet_core/source/postgres/libpq_access.py and "
                       "rivet_core/source/mysql/wire.py — move them into the adapter:\n" + "\n".join(found))


def test_the_scan_finds_a_planted_private_use(tmp_path: Path) -> None:
    """The scan is not vacuous: the two touches the binary reader used to make itself."""
    planted = tmp_path / "rivet_core" / "source" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("from psycopg.pq import _pq_ctypes\n\ndef end(copy):\n    copy._finished = True\n"
                       "\ndef seq(conn):\n    return getattr(conn, '_next_seq_id')\n", encoding="utf-8")
    assert driver_private_uses(tmp_path) == [
        "rivet_core/source/planted.py:1: from psycopg.pq import _pq_ctypes",
        "rivet_core/source/planted.py:4: copy._finished",
        "rivet_core/source/planted.py:7: getattr(conn, '_next_seq_id')",
    ]


# ------------------------------------------------------------- the gates and the ranges
def _declared_range(distribution: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(lowest admitted minor, first excluded minor) of `distribution` in pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(rf'"{re.escape(distribution)}(?:\[[^\]]*\])?>=(\d+)\.(\d+),<(\d+)\.(\d+)"', text)
    assert found, f"pyproject.toml declares no '{distribution}>=X.Y,<X.Z' range"
    low_major, low_minor, high_major, high_minor = map(int, found.groups())
    return (low_major, low_minor), (high_major, high_minor)


def _minors(low: tuple[int, int], high: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    assert low[0] == high[0], f"a range across majors ({low} .. {high}) needs its gate listed by hand"
    return tuple((low[0], minor) for minor in range(low[1], high[1]))


@pytest.mark.parametrize(("distribution", "tested"), [("psycopg", libpq_access.TESTED), ("PyMySQL", wire.TESTED)])
def test_each_adapters_version_gate_is_exactly_the_range_pyproject_declares(
        distribution: str, tested: tuple[tuple[int, int], ...]) -> None:
    """A range wider than the gate would install releases the fast path silently skips; a
    gate wider than the range lists releases no test runs."""
    assert tested == _minors(*_declared_range(distribution))


def _oldest(distribution: str) -> str:
    (major, minor), _ = _declared_range(distribution)
    return f"{major}.{minor}.0"


def test_the_releases_this_process_runs_on_are_the_expected_ones() -> None:
    """Under the oldest-release run, proves the throwaway venv's releases are the ones imported."""
    expected = os.environ.get(EXPECT_ENV)
    running = f"psycopg=={psycopg.__version__},PyMySQL=={'.'.join(map(str, wire.pymysql_version()))}"
    if expected:
        assert running == expected
    assert psycopg.pq.__impl__ == "binary", running  # psycopg[binary], as pyproject.toml installs it


# -------------------------------------------------------------- the psycopg contract
def _pg_conn(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def _copy_by_c(conn: psycopg.Connection[Any], sql: str) -> tuple[bytes, int, list[Any], psycopg.Copy]:
    """Run a binary COPY whose data the C loop reads through the adapter's libpq functions."""
    get, free = libpq_access.copy_data_functions()
    pointer = libpq_access.pgconn_pointer(conn)
    cursor = conn.cursor()
    with cursor.copy(sql) as copy:
        data, status = b"", 0
        while not status:
            chunk, status = pg_binary._pgbinary.fetch(get, free, pointer, 1 << 16)
            data += chunk
        results = libpq_access.end_copy(conn, copy)
    return data, status, results, copy


def test_the_installed_psycopg_drives_the_binary_reader_on_a_real_connection(pg_url: str) -> None:
    assert pg_binary._pgbinary is not None, "the C extension is not built — run scripts/bootstrap.sh"
    with _pg_conn(pg_url) as conn:
        assert libpq_access.fallback(conn) is None
        assert pg_binary.planned_path(conn).startswith(
            f"binary COPY decoded in C (psycopg {psycopg.__version__}")


def test_the_c_loop_reads_through_psycopgs_libpq_exactly_what_psycopgs_own_copy_reads(pg_url: str) -> None:
    sql = ("COPY (SELECT g, 'row ' || g, g * 0.5 FROM generate_series(1, 5000) AS g) "
           "TO STDOUT (FORMAT binary)")
    with _pg_conn(pg_url) as conn:
        with conn.cursor().copy(sql) as copy:
            expected = b"".join(bytes(block) for block in copy)
        data, status, results, _ = _copy_by_c(conn, sql)
        assert (status, data) == (1, expected)
        assert [r.status for r in results] == [psycopg.pq.ExecStatus.COMMAND_OK]
        libpq_access.raise_first_error(conn, results)  # nothing to raise
        assert conn.execute("SELECT 41 + 1").fetchone() == (42,)  # psycopg reads on, in step


def test_a_server_error_in_a_copy_the_c_loop_read_is_raised_as_psycopgs_own_error(pg_url: str) -> None:
    sql = ("COPY (SELECT 1 / (g - 3000) FROM generate_series(1, 5000) AS g) TO STDOUT (FORMAT binary)")
    with _pg_conn(pg_url) as conn:
        _, status, results, _ = _copy_by_c(conn, sql)
        assert status in (1, 2)  # libpq ends the data at a server error too; the result says which
        with pytest.raises(psycopg.errors.DivisionByZero, match="division by zero"):
            libpq_access.raise_first_error(conn, results)
        assert conn.execute("SELECT 1").fetchone() == (1,)


# -------------------------------------------------------------- the PyMySQL contract
SQL_ROWS = "SELECT id, name FROM t ORDER BY id"


@pytest.fixture
def mysql_table(mysql_url: str) -> str:
    db_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))",
            "INSERT INTO t VALUES " + ", ".join(f"({i}, 'n{i}')" for i in range(1, 301)))
    return mysql_url


def _rivet_conn(url: str) -> Any:
    from rivet_core.source.mysql.session import mysql_connect as source_connect

    return source_connect(url)


def test_the_installed_pymysql_drives_the_packet_readers_on_a_real_connection(mysql_table: str) -> None:
    conn = _rivet_conn(mysql_table)
    try:
        assert isinstance(conn, wire._Connection)  # the shared `preferred` TLS context took
        assert wire.unsupported_reason(conn) is None and wire.fallback(conn) is None
        assert mysql_raw.planned_path(conn).startswith("binary protocol")
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            cipher = (cur.fetchone() or ("", ""))[1]
        assert wire.is_tls(conn) == bool(cipher)
    finally:
        conn.close()


def test_the_text_packet_reader_reads_the_rows_pymysql_reads_and_hands_the_connection_back(
        mysql_table: str) -> None:
    conn = _rivet_conn(mysql_table)
    try:
        cur = conn.cursor(pymysql.cursors.SSCursor)
        cur.execute(SQL_ROWS)
        assert [p.name for p in wire.field_packets(cur)] == ["id", "name"]
        result = wire.unread_rows(cur)
        assert result is not None and len(wire.value_converters(result)) == 2
        reader = mysql_raw.PacketReader(conn, result)
        rows = []
        while (batch := reader.read_batch(64)) is not None:
            data, starts, ends = batch
            rows += [_text_row(bytes(data[s:e])) for s, e in zip(starts, ends, strict=True)]
        assert wire.unread_rows(cur) is None  # `end_result`: PyMySQL sees the result drained
        cur.close()
        assert rows == [(str(i), f"n{i}") for i in range(1, 301)]
        with conn.cursor() as check:
            check.execute("SELECT COUNT(*) FROM t")
            assert check.fetchone() == (300,)
    finally:
        conn.close()


def _text_row(payload: bytes) -> tuple[str, ...]:
    """A text-protocol row of short, non-NULL values: length byte + bytes, per column."""
    values, at = [], 0
    while at < len(payload):
        size = payload[at]
        values.append(payload[at + 1:at + 1 + size].decode())
        at += 1 + size
    return tuple(values)


def test_a_prepared_statement_runs_through_the_wire_and_its_rows_come_back(mysql_table: str) -> None:
    conn = _rivet_conn(mysql_table)
    try:
        prepared = mysql_binary.prepare(conn, "SELECT id FROM t WHERE id <= 5 ORDER BY id")
        assert prepared is not None and [f.name for f in prepared.fields] == ["id"]
        reader = mysql_binary.execute(conn, prepared)
        ids = []
        while (batch := reader.read_batch(64)) is not None:
            data, starts, _ = batch
            # binary row: 0x00 header, NULL bitmap (1 byte for one column), then int32 LE
            ids += [int.from_bytes(bytes(data[s + 2:s + 6]), "little") for s in starts]
        mysql_binary.close(conn, prepared)
        assert ids == [1, 2, 3, 4, 5]
        with conn.cursor() as cur:
            cur.execute("SELECT 41 + 1")
            assert cur.fetchone() == (42,)
    finally:
        conn.close()


def test_an_error_packet_ends_the_result_and_a_protocol_error_drops_the_connection(
        mysql_table: str) -> None:
    conn = _rivet_conn(mysql_table)
    try:
        w = wire.Wire(conn)
        w.execute_command(COMMAND.COM_QUERY, "SELECT * FROM no_such_table")
        with pytest.raises(pymysql.err.ProgrammingError, match="no_such_table"):
            w.read_packet()
        result = wire.BinaryResult(conn)
        wire.abandon_result(result)
        assert result.unbuffered_active is False
        with conn.cursor() as cur:  # an error packet leaves the connection in step
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        w.use_read_timeout()
        w.next_seq_id = w.next_seq_id
        w.force_close()
        assert conn.open is False
    finally:
        conn.close()


# ------------------------------------------------------------ the oldest release too
def _site_packages() -> str:
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def test_the_oldest_releases_pyproject_admits_pass_the_same_contract(tmp_path: Path) -> None:
    """psycopg and PyMySQL at the bottom of their pyproject.toml ranges, installed with uv
    into a throwaway venv whose other packages are this venv's, run this module's contract."""
    if os.environ.get(EXPECT_ENV):
        pytest.skip("this is the oldest-release run itself")  # no recursion
    uv = Path(sys.executable).with_name("uv")
    assert uv.exists(), f"{uv} missing — run scripts/bootstrap.sh (it installs uv into .venv)"
    psycopg_oldest, pymysql_oldest = _oldest("psycopg"), _oldest("PyMySQL")
    venv = tmp_path / "venv"
    wanted = [f"psycopg=={psycopg_oldest}", f"psycopg-binary=={psycopg_oldest}", f"PyMySQL=={pymysql_oldest}"]
    for command in ([str(uv), "venv", "-q", str(venv), "--python", sys.executable],
                    [str(uv), "pip", "install", "-q", "--no-deps", "--python", str(venv / "bin" / "python"),
                     *wanted]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (f"cannot install the oldest supported driver releases "
                                      f"({' '.join(wanted)}): `{' '.join(command)}` said:\n{done.stderr}")
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the venv's own site-packages (the old drivers) first, then this venv's (everything else)
    Path(purelib, "_rivet_base.pth").write_text(f"import site; site.addsitedir({_site_packages()!r})\n")
    expect = f"psycopg=={psycopg_oldest},PyMySQL=={pymysql_oldest}"
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", __file__, "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-k", "not oldest and not moved"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, EXPECT_ENV: expect, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, f"the contract fails on {expect}:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]


# ------------------------------------------------------- a moved driver, loudly
MOVED = {
    # psycopg's pure-Python implementation without its ctypes binding module
    "psycopg_ctypes_gone": ({"PSYCOPG_IMPL": "python"},
                            "import sys\nimport psycopg.pq\ndel psycopg.pq._pq_ctypes\n"
                            "sys.modules['psycopg.pq._pq_ctypes'] = None\n"),
    # a psycopg release outside the gate (the real one, told it is 3.4.0)
    "psycopg_3_4": ({}, "import psycopg\npsycopg.__version__ = '3.4.0'\n"),
    # a PyMySQL release that renamed its packet counter (`_next_seq_id`) throughout: its own
    # code works on, the packet readers' adapter cannot find the member
    "pymysql_seq_id_renamed": ({}, "import importlib.util, pathlib, sys\nimport pymysql\n"
                                   "spec = importlib.util.find_spec('pymysql.connections')\n"
                                   "code = pathlib.Path(spec.origin).read_text().replace('_next_seq_id', '_seq_id')\n"
                                   "module = importlib.util.module_from_spec(spec)\n"
                                   "sys.modules['pymysql.connections'] = pymysql.connections = module\n"
                                   "exec(compile(code, spec.origin, 'exec'), module.__dict__)\n"),
    # a PyMySQL release outside the gate (the real one, told it is 1.3.0)
    "pymysql_1_3": ({}, "import pymysql\npymysql.VERSION = (1, 3, 0, 'final', 0)\n"),
}


def _moved_env(tmp_path: Path, case: str) -> dict[str, str]:
    env, code = MOVED[case]
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code, encoding="utf-8")
    return {**env, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}


def _run(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rivet_core.cli", "run", "-c", str(config)],
                          capture_output=True, text=True, env={**os.environ, **env}, cwd=config.parent,
                          timeout=300)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "fast read path off" in line]


def _source_rows(url: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in db_exec(url, "SELECT id, name, amount FROM items"))


def _exported_rows(prefix: Path) -> list[tuple[Any, ...]]:
    table = pa.concat_tables([read_table(p) for p in data_files(prefix)])
    return sorted(tuple(r.values()) for r in table.select(["id", "name", "amount"]).to_pylist())


@pytest.mark.parametrize(("case", "expected"), [
    ("psycopg_ctypes_gone",
     rf"psycopg {re.escape(psycopg.__version__)}: psycopg\.pq\._pq_ctypes is gone \(.*\) — reading through "
     r"ADBC's binary COPY instead of the C binary COPY reader \(≈1\.3× slower\); install a tested psycopg "
     r"release \(3\.2, 3\.3\) or upgrade rivet"),
    ("psycopg_3_4",
     r"psycopg 3\.4\.0: not a release the binary COPY reader is tested with \(3\.2, 3\.3\) — reading through "
     r"ADBC's binary COPY instead of the C binary COPY reader \(≈1\.3× slower\); pin psycopg<3\.4 or upgrade rivet"),
])
def test_a_moved_psycopg_makes_a_chunked_run_warn_once_and_export_exactly(
        tmp_path: Path, pg_url: str, case: str, expected: str) -> None:
    _items(pg_url, "id int PRIMARY KEY, name text, amount numeric(10,2)")
    config = write_config(tmp_path, source_block(pg_url), [_chunked_export()])
    done = _run(config, _moved_env(tmp_path, case))
    assert done.returncode == 0, done.stderr[-3000:]
    found = _warnings(done.stderr)
    assert len(found) == 1, done.stderr[-3000:]
    assert re.search(expected, found[0]), found[0]
    assert _exported_rows(tmp_path / "out") == _source_rows(pg_url)


@pytest.mark.parametrize(("case", "expected"), [
    ("pymysql_seq_id_renamed",
     "PyMySQL {version}: PyMySQL connection has no _next_seq_id — reading through PyMySQL's row path instead "
     "of the binary-protocol packet reader (≈4–7× slower); install a tested PyMySQL release (1.1, 1.2) or "
     "upgrade rivet"),
    ("pymysql_1_3",
     "PyMySQL 1.3.0: not a release the packet readers are tested with (1.1, 1.2) — reading through PyMySQL's "
     "row path instead of the binary-protocol packet reader (≈4–7× slower); pin PyMySQL<1.3 or upgrade rivet"),
])
def test_a_moved_pymysql_makes_a_chunked_run_warn_once_and_export_exactly(
        tmp_path: Path, mysql_url: str, case: str, expected: str) -> None:
    _items(mysql_url, "id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2)")
    config = write_config(tmp_path, source_block(mysql_url), [_chunked_export()])
    done = _run(config, _moved_env(tmp_path, case))
    assert done.returncode == 0, done.stderr[-3000:]
    found = _warnings(done.stderr)
    assert len(found) == 1, done.stderr[-3000:]
    assert expected.format(version=".".join(map(str, wire.pymysql_version()))) in found[0]
    assert _exported_rows(tmp_path / "out") == _source_rows(mysql_url)


def test_an_unmoved_driver_runs_the_fast_path_without_a_warning(tmp_path: Path, pg_url: str) -> None:
    _items(pg_url, "id int PRIMARY KEY, name text, amount numeric(10,2)")
    config = write_config(tmp_path, source_block(pg_url), [_chunked_export()])
    done = _run(config, {"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert _warnings(done.stderr) == []
    assert _exported_rows(tmp_path / "out") == _source_rows(pg_url)


def _doctor_read_path(config: Path, env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "rivet_core.cli", "doctor", "-c", str(config)],
                          capture_output=True, text=True, env={**os.environ, **env}, cwd=config.parent, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("[OK] read path")]


def test_doctor_shows_the_postgres_read_path_and_a_moved_psycopgs_fallback(tmp_path: Path, pg_url: str) -> None:
    _items(pg_url, "id int PRIMARY KEY, name text, amount numeric(10,2)")
    config = write_config(tmp_path, source_block(pg_url), [_chunked_export()])
    assert _doctor_read_path(config, {"PYTHONPATH": str(REPO)}) == [
        f"[OK] read path (PostgreSQL): binary COPY decoded in C (psycopg {psycopg.__version__}, its libpq "
        "found) for columns with an exact binary form, else the row path"]
    assert _doctor_read_path(config, _moved_env(tmp_path, "psycopg_3_4")) == [
        "[OK] read path (PostgreSQL): fallback — psycopg 3.4.0: not a release the binary COPY reader is "
        "tested with (3.2, 3.3) — reading through ADBC's binary COPY instead of the C binary COPY reader "
        "(≈1.3× slower); pin psycopg<3.4 or upgrade rivet"]


def test_doctor_shows_the_mysql_read_path_and_a_moved_pymysqls_fallback(tmp_path: Path, mysql_url: str) -> None:
    _items(mysql_url, "id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2)")
    config = write_config(tmp_path, source_block(mysql_url), [_chunked_export()])
    version = ".".join(map(str, wire.pymysql_version()))
    assert _doctor_read_path(config, {"PYTHONPATH": str(REPO)}) == [
        f"[OK] read path (MySQL/MariaDB): binary protocol, packets framed in C (PyMySQL {version}) for "
        "eligible columns, else the text-protocol packet reader"]
    assert _doctor_read_path(config, _moved_env(tmp_path, "pymysql_seq_id_renamed")) == [
        f"[OK] read path (MySQL/MariaDB): fallback — PyMySQL {version}: PyMySQL connection has no "
        "_next_seq_id — reading through PyMySQL's row path instead of the binary-protocol packet reader "
        "(≈4–7× slower); install a tested PyMySQL release (1.1, 1.2) or upgrade rivet"]


def _items(url: str, columns: str) -> None:
    rows = ", ".join(f"({i}, 'name {i}', {i}.25)" for i in range(1, 1001))
    db_exec(url, f"CREATE TABLE items ({columns})", f"INSERT INTO items VALUES {rows}")


def _chunked_export() -> dict[str, Any]:
    """Several windows, so several streams: the warning must still be said once."""
    return {"name": "items", "table": "items", "mode": "chunked", "chunk_column": "id", "chunk_size": 250,
            "format": "parquet", "destination": {"type": "local", "path": "out"}}
