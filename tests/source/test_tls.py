"""`source.tls` against real TLS servers: a private PostgreSQL and a private MariaDB, both
started by this module with a throwaway CA, so the shared test servers stay untouched.

What is proven: an export with `tls: {mode: verify-full, ca_file: …}` succeeds and the
exporting session itself is encrypted (the export query reads `pg_stat_ssl` / the session's
`Ssl_cipher`, so the value comes from the connection Rivet made); a user the server only
accepts over TLS fails clearly with TLS disabled; a wrong CA fails naming TLS verification;
`require` against a server without TLS fails instead of downgrading. Servers that cannot
start FAIL the module (never skip), like every fixture in tests/conftest.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rivet_core import api
from rivet_core.config.models import SourceConfig, TlsConfig
from rivet_core.config.tls import apply_tls
from rivet_core.errors import ConfigError
from rivet_core.source.mysql.session import mysql_connect_args
from tests.conftest import _require_env
from tests.helpers import write_config

PGBIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
IS_ROOT = os.geteuid() == 0


def _run(*cmd: str | Path, what: str) -> None:
    """Run a setup command; its output (which may include key material) is never shown."""
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"{what} failed (exit {done.returncode}): {done.stderr[-400:]}", pytrace=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes] | None, log: Path) -> None:
    for _ in range(300):
        if ready():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
    pytest.fail(f"{what} did not start; its log ends:\n{tail}", pytrace=False)


@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path         # signed the server certificate
    wrong_ca: Path   # an unrelated CA
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def certs() -> Iterator[Certs]:
    """A throwaway CA and a server certificate for 127.0.0.1 (EC keys: fast to make)."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is required to make the test certificates", pytrace=False)
    d = Path(tempfile.mkdtemp(prefix="rivet-tls-certs-"))
    d.chmod(0o755)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("ca", "wrong_ca"):
        _run("openssl", "req", "-x509", *ec, "-keyout", d / f"{name}.key", "-out", d / f"{name}.pem",
             "-days", "2", "-subj", f"/CN=rivet-test-{name}", what=f"making {name}")
    _run("openssl", "req", *ec, "-keyout", d / "server.key", "-out", d / "server.csr",
         "-subj", "/CN=127.0.0.1", what="making the server key")
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    _run("openssl", "x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
         "-CAcreateserial", "-out", d / "server.pem", "-days", "2", "-extfile", d / "ext.cnf",
         what="signing the server certificate")
    yield Certs(d, d / "ca.pem", d / "wrong_ca.pem", d / "server.pem", d / "server.key")
    shutil.rmtree(d, ignore_errors=True)


def _as_postgres(*cmd: str | Path) -> list[str]:
    return (["runuser", "-u", "postgres", "--"] if IS_ROOT else []) + [str(c) for c in cmd]


@pytest.fixture(scope="module")
def tls_pg(certs: Certs) -> Iterator[str]:
    """A private PostgreSQL with ssl=on whose pg_hba admits role `tls_reader` only over TLS
    (`hostssl`); returns its port. `postgres` may connect without TLS for the setup."""
    if not (PGBIN / "initdb").exists():
        pytest.fail(f"PostgreSQL binaries not found in {PGBIN} — set PGBIN", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="rivet-tls-pg-"))
    root.chmod(0o755)
    data = root / "data"
    if IS_ROOT:
        shutil.chown(root, "postgres", "postgres")
    done = subprocess.run(_as_postgres(PGBIN / "initdb", "-D", data, "-A", "trust", "-U", "postgres",
                                       "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"),
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"initdb failed: {done.stderr[-400:]}", pytrace=False)
    for src, name in ((certs.cert, "server.crt"), (certs.key, "server.key")):
        shutil.copy(src, data / name)
        (data / name).chmod(0o600)  # PostgreSQL refuses a key readable by others
        if IS_ROOT:
            shutil.chown(data / name, "postgres", "postgres")
    (data / "pg_hba.conf").write_text(
        "local all all trust\n"
        "hostssl all all 127.0.0.1/32 trust\n"
        "host all postgres 127.0.0.1/32 trust\n")
    port = _free_port()
    opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c ssl=on "
            "-c ssl_cert_file=server.crt -c ssl_key_file=server.key")
    log = root / "pg.log"
    done = subprocess.run(_as_postgres(PGBIN / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "30",
                                       "-o", opts, "start"), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else done.stderr
        pytest.fail(f"the TLS PostgreSQL did not start:\n{tail}", pytrace=False)
    try:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable",
                             autocommit=True) as conn:
            conn.execute("CREATE ROLE tls_reader LOGIN")
            conn.execute("CREATE DATABASE shop OWNER tls_reader")
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/shop?sslmode=disable",
                             autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
            conn.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            conn.execute("GRANT SELECT ON items TO tls_reader")
        yield str(port)
    finally:
        subprocess.run(_as_postgres(PGBIN / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"),
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_mariadb(certs: Certs) -> Iterator[str]:
    """A private MariaDB with TLS (--ssl-ca/--ssl-cert/--ssl-key) and a user `tls_reader`
    created `REQUIRE SSL`; returns its port."""
    for tool in ("mariadbd", "mariadb-install-db"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is required for the MariaDB TLS tests", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="rivet-tls-my-"))
    root.chmod(0o755)
    _run("mariadb-install-db", "--no-defaults", f"--datadir={root / 'data'}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db", what="mariadb-install-db")
    port = _free_port()
    sock, log = root / "mysqld.sock", root / "error.log"
    proc = subprocess.Popen(
        ["mariadbd", "--no-defaults", f"--datadir={root / 'data'}", f"--socket={sock}",
         f"--port={port}", "--bind-address=127.0.0.1", "--user=root", f"--log-error={log}",
         f"--pid-file={root / 'mysqld.pid'}", "--skip-name-resolve",
         "--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=16M",
         "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
         f"--ssl-ca={certs.ca}", f"--ssl-cert={certs.cert}", f"--ssl-key={certs.key}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import pymysql

        def admin() -> Any:
            return pymysql.connect(unix_socket=str(sock), user="root", autocommit=True)

        def ready() -> bool:
            try:
                admin().close()
                return True
            except pymysql.err.MySQLError:
                return False

        _wait("the TLS MariaDB", ready, proc, log)
        conn = admin()
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop CHARACTER SET utf8mb4")
            cur.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(10))")
            cur.execute("INSERT INTO shop.items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            cur.execute("CREATE USER 'tls_reader'@'%' REQUIRE SSL")
            cur.execute("GRANT SELECT ON shop.* TO 'tls_reader'@'%'")
        conn.close()
        yield str(port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- helpers

PG_SSL_QUERY = ("SELECT i.id, (SELECT s.ssl FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()) "
                "AS session_ssl FROM items i")
MY_SSL_QUERY = ("SELECT i.id, (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS "
                "WHERE VARIABLE_NAME = 'Ssl_cipher') AS session_cipher FROM items i")


def _export(tmp_path: Path, source: dict[str, Any], query: str) -> tuple[str, list[dict[str, Any]]]:
    """Run one export through the real API; ("success", rows) or ("<status>", [error text])."""
    config_path = write_config(tmp_path, {**source, "tuning": {"profile": "fast", "max_retries": 0}}, [{
        "name": "items", "query": query, "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    try:
        summary = api.run_export(api.load_config(config_path), "items")
    except Exception as exc:  # noqa: BLE001 - the error text is what the tests assert on
        return "error", [str(exc)]
    if summary.status != "success":
        return summary.status, [str(summary.error_message)]
    parts = sorted((tmp_path / "out").rglob("*.parquet"))
    rows = [r for p in parts for r in pq.read_table(p).to_pylist()]
    return "success", sorted(rows, key=lambda r: r["id"])


def _ca_next_to_config(tmp_path: Path, ca: Path) -> str:
    """Copy the CA beside rivet.yaml and return the relative name (paths resolve from there)."""
    shutil.copy(ca, tmp_path / "ca.pem")
    return "ca.pem"


# --------------------------------------------------------------------------- PostgreSQL


def test_pg_verify_full_export_runs_over_tls(tmp_path: Path, tls_pg: str, certs: Certs) -> None:
    source = {"type": "postgres", "url": f"postgresql://tls_reader@127.0.0.1:{tls_pg}/shop",
              "tls": {"mode": "verify-full", "ca_file": _ca_next_to_config(tmp_path, certs.ca)}}
    status, rows = _export(tmp_path, source, PG_SSL_QUERY)
    assert status == "success", rows
    assert rows == [{"id": i, "session_ssl": True} for i in (1, 2, 3)]


def test_pg_hostssl_only_role_is_refused_with_tls_disabled(tmp_path: Path, tls_pg: str) -> None:
    source = {"type": "postgres", "url": f"postgresql://tls_reader@127.0.0.1:{tls_pg}/shop",
              "tls": {"mode": "disable"}}
    status, [error] = _export(tmp_path, source, PG_SSL_QUERY)
    assert status != "success"
    assert "no encryption" in error and "only over TLS; set source.tls" in error, error


def test_pg_verify_full_with_the_wrong_ca_fails_naming_tls_verification(
        tmp_path: Path, tls_pg: str, certs: Certs) -> None:
    source = {"type": "postgres", "url": f"postgresql://tls_reader@127.0.0.1:{tls_pg}/shop",
              "tls": {"mode": "verify-full", "ca_file": str(certs.wrong_ca)}}
    status, [error] = _export(tmp_path, source, PG_SSL_QUERY)
    assert status != "success"
    assert "TLS verification failed" in error and "certificate verify failed" in error, error


def test_pg_require_against_a_server_without_tls_fails_instead_of_downgrading(tmp_path: Path) -> None:
    url = _require_env("TEST_PG_DSN", "PostgreSQL")  # the shared test server has no TLS
    status, [error] = _export(tmp_path, {"type": "postgres", "url": url, "tls": {"mode": "require"}},
                              "SELECT 1 AS id")
    assert status != "success"
    assert "server does not support SSL" in error, error


# --------------------------------------------------------------------------- MariaDB


def test_mariadb_verify_full_export_runs_over_tls(tmp_path: Path, tls_mariadb: str, certs: Certs) -> None:
    source = {"type": "mysql", "url": f"mysql://tls_reader@127.0.0.1:{tls_mariadb}/shop",
              "tls": {"mode": "verify-full", "ca_file": _ca_next_to_config(tmp_path, certs.ca)}}
    status, rows = _export(tmp_path, source, MY_SSL_QUERY)
    assert status == "success", rows
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert all(r["session_cipher"] for r in rows), rows  # the exporting session is encrypted


def test_mariadb_session_reports_a_cipher(tls_mariadb: str, certs: Certs, tmp_path: Path) -> None:
    """SHOW STATUS on the session Rivet opened (the same helper every path uses)."""
    from rivet_core.source.mysql.session import mysql_connect

    url = apply_tls(f"mysql://tls_reader@127.0.0.1:{tls_mariadb}/shop", "mysql",
                    TlsConfig(mode="verify-ca", ca_file=str(certs.ca)), tmp_path)
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")
            (_, cipher), = cur.fetchall()
    finally:
        conn.close()
    assert cipher


def test_mariadb_require_ssl_user_is_refused_with_tls_disabled(tmp_path: Path, tls_mariadb: str) -> None:
    source = {"type": "mysql", "url": f"mysql://tls_reader@127.0.0.1:{tls_mariadb}/shop",
              "tls": {"mode": "disable"}}
    status, [error] = _export(tmp_path, source, MY_SSL_QUERY)
    assert status != "success"
    assert "Access denied" in error and "must connect over TLS" in error, error


def test_mariadb_wrong_ca_fails_naming_tls_verification(tmp_path: Path, tls_mariadb: str, certs: Certs) -> None:
    source = {"type": "mysql", "url": f"mysql://tls_reader@127.0.0.1:{tls_mariadb}/shop",
              "tls": {"mode": "verify-full", "ca_file": str(certs.wrong_ca)}}
    status, [error] = _export(tmp_path, source, MY_SSL_QUERY)
    assert status != "success"
    assert "TLS verification failed" in error, error


def test_mysql_require_against_a_server_without_tls_fails_instead_of_downgrading(tmp_path: Path) -> None:
    url = _require_env("TEST_MYSQL_DSN", "MariaDB/MySQL")  # the shared test server has no TLS
    status, [error] = _export(tmp_path, {"type": "mysql", "url": url, "tls": {"mode": "require"}},
                              "SELECT 1 AS id")
    assert status != "success"
    assert "TLS" in error and "doesn't support it" in error, error


# --------------------------------------------------------------------------- config → URL


def _source(**kw: Any) -> SourceConfig:
    return SourceConfig.model_validate(kw)


def test_relative_ca_file_resolves_from_the_config_dir(tmp_path: Path, certs: Certs) -> None:
    shutil.copy(certs.ca, tmp_path / "ca.pem")
    src = _source(type="postgres", url="postgresql://u@h/db", tls={"ca_file": "ca.pem"})
    url = src.resolve_url(tmp_path)
    assert f"sslrootcert={tmp_path / 'ca.pem'}" in url and "sslmode=verify-full" in url


def test_a_missing_ca_file_is_a_config_error_naming_field_and_path(tmp_path: Path) -> None:
    for kind, url in (("postgres", "postgresql://u@h/db"), ("mysql", "mysql://u@h/db")):
        src = _source(type=kind, url=url, tls={"mode": "verify-ca", "ca_file": "certs/nope.pem"})
        with pytest.raises(ConfigError, match=r"source\.tls\.ca_file: file not found") as info:
            src.resolve_url(tmp_path)
        assert str(tmp_path / "certs" / "nope.pem") in str(info.value)


def test_url_and_tls_block_that_disagree_are_a_config_error(tmp_path: Path) -> None:
    src = _source(type="postgres", url="postgresql://u@h/db?sslmode=disable", tls={"mode": "require"})
    with pytest.raises(ConfigError, match=r"source\.tls\.mode \(require\) conflicts with sslmode=disable"):
        src.resolve_url(tmp_path)
    agree = _source(type="mysql", url="mysql://u@h/db?ssl-mode=REQUIRED", tls={"mode": "require"})
    assert agree.resolve_url(tmp_path).count("ssl-mode") == 1


def test_danger_knobs_weaken_the_default_mode_and_urls_without_tls_are_unchanged(tmp_path: Path) -> None:
    certs_off = _source(type="postgres", url="postgresql://u@h/db", tls={"accept_invalid_certs": True})
    assert "sslmode=require" in certs_off.resolve_url(tmp_path)
    names_off = _source(type="mysql", url="mysql://u@h/db", tls={"accept_invalid_hostnames": True})
    assert "ssl-mode=verify_ca" in names_off.resolve_url(tmp_path)
    assert _source(type="postgres", url="postgresql://u@h/db?sslmode=require").resolve_url(tmp_path) == (
        "postgresql://u@h/db?sslmode=require")
    # MySQL URL parameters now reach PyMySQL: disabled really disables (PyMySQL's default
    # would otherwise try TLS opportunistically), required passes a verifying-nothing context.
    assert mysql_connect_args("mysql://u@h/db?ssl-mode=disabled")["ssl_disabled"] is True
    assert "ssl" in mysql_connect_args("mysql://u@h/db?ssl-mode=required")
    with pytest.raises(ConfigError, match="not a MySQL TLS mode"):
        mysql_connect_args("mysql://u@h/db?ssl-mode=sometimes")
