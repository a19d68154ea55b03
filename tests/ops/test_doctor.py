"""`rivet doctor` against real servers and really broken things: each failure is one [FAIL]
line naming the problem and the fix, the exit code is non-zero, no secret is printed; a
healthy config is all [OK] with exit 0."""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import db_exec, source_block, write_config
from tests.helpers import rivet_quick as rivet  # no process of its own needed
from tests.ops.doctor_support import (  # noqa: F401 - fixtures
    PasswordRole,
    free_port,
    mysql_user_with_password,
    pg_role_with_password,
    read_only_dir,
)

WRONG = "Wrong-Pa55-doctor-7f3"


def _export(name: str, destination: dict[str, Any], table: str = "items") -> dict[str, Any]:
    return {"name": name, "table": table, "mode": "full", "format": "parquet", "destination": destination}


def _sqlite_source(tmp: Path) -> dict[str, Any]:
    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT OR IGNORE INTO items VALUES (?, ?)", [(i, f"v{i}") for i in range(20)])
    return {"type": "sqlite", "url": f"sqlite:///{db}"}


def doctor(config: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, list[str]]:
    proc = rivet("doctor", "-c", str(config), *args, env=env)
    return proc.returncode, proc.stdout + proc.stderr, proc.stdout.splitlines()


def fail_line(lines: list[str], name_prefix: str) -> str:
    found = [ln for ln in lines if ln.startswith(f"[FAIL] {name_prefix}")]
    assert len(found) == 1, f"expected one [FAIL] {name_prefix} line in:\n" + "\n".join(lines)
    return found[0]


def _items(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id int PRIMARY KEY, v varchar(20))",
            "INSERT INTO items VALUES (1, 'a'), (2, 'b')")


# ------------------------------------------------------------------------------ source
@pytest.mark.postgres
def test_wrong_postgres_password_is_an_authentication_failure_naming_the_user_and_the_env_var(
        tmp_path: Path, pg_role_with_password: PasswordRole) -> None:
    role = pg_role_with_password
    config = write_config(tmp_path, {"type": "postgres", "url_env": "RIVET_DOCTOR_PG_URL"},
                          [_export("e", {"type": "local", "path": "out"})])

    code, _out, lines = doctor(config, env={"RIVET_DOCTOR_PG_URL": role.url})  # control: right password
    assert code == 0, "\n".join(lines)
    assert any(ln.startswith("[OK] source (PostgreSQL)") and role.user in ln for ln in lines)

    code, out, lines = doctor(config, env={"RIVET_DOCTOR_PG_URL": role.url_with(WRONG)})
    line = fail_line(lines, "source (PostgreSQL)")
    assert f"authentication failed for user '{role.user}'" in line
    assert "fix:" in line and "RIVET_DOCTOR_PG_URL" in line.split("fix:", 1)[1]
    assert code == 1
    assert WRONG not in out and role.password not in out
    assert lines[-1].startswith("Some checks failed: 1 of ") and "fix the [FAIL] lines" in lines[-1]


@pytest.mark.mysql
def test_wrong_mariadb_password_is_an_authentication_failure_naming_the_user_and_the_env_var(
        tmp_path: Path, mysql_url: str, mysql_user_with_password: PasswordRole) -> None:
    role = mysql_user_with_password
    config = write_config(tmp_path, {"type": "mysql", "url_env": "RIVET_DOCTOR_MY_URL"},
                          [_export("e", {"type": "local", "path": "out"})])

    code, _out, lines = doctor(config, env={"RIVET_DOCTOR_MY_URL": role.url})
    assert code == 0, "\n".join(lines)

    code, out, lines = doctor(config, env={"RIVET_DOCTOR_MY_URL": role.url_with(WRONG)})
    line = fail_line(lines, "source (MySQL/MariaDB)")
    assert f"authentication failed for user '{role.user}'" in line
    assert "RIVET_DOCTOR_MY_URL" in line.split("fix:", 1)[1]
    assert code == 1
    assert WRONG not in out and role.password not in out


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_an_unreachable_port_says_cannot_connect_to_host_and_port_and_exits_2(
        tmp_path: Path, engine: str) -> None:
    port = free_port()
    scheme = "postgresql" if engine == "postgres" else "mysql"
    url = f"{scheme}://someone:{WRONG}@127.0.0.1:{port}/db"
    config = write_config(tmp_path, {"type": engine, "url_env": "RIVET_DOCTOR_URL"},
                          [_export("e", {"type": "local", "path": "out"})])
    code, out, lines = doctor(config, env={"RIVET_DOCTOR_URL": url})
    line = fail_line(lines, "source")
    assert f"cannot connect to 127.0.0.1:{port} (connection refused)" in line
    assert "server is running" in line.split("fix:", 1)[1] and "RIVET_DOCTOR_URL" in line
    # Only a transient failure: exit 2, the "retry later" class of the exit-code convention.
    assert code == 2
    assert WRONG not in out
    assert any(ln.startswith("[OK] destination e") for ln in lines)
    assert any(ln.startswith("[OK] state store") for ln in lines)


def test_an_unset_url_env_variable_is_named_with_the_fix(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"type": "postgres", "url_env": "RIVET_DOCTOR_UNSET_VAR"},
                          [_export("e", {"type": "local", "path": "out"})])
    code, _out, lines = doctor(config)
    line = fail_line(lines, "source")
    assert "RIVET_DOCTOR_UNSET_VAR" in line and "fix:" in line
    assert code == 1


# ------------------------------------------------------------------------- destination
def test_a_read_only_destination_directory_is_reported_with_its_path(
        tmp_path: Path, read_only_dir: Path) -> None:
    config = write_config(tmp_path, _sqlite_source(tmp_path),
                          [_export("ro_export", {"type": "local", "path": str(read_only_dir / "a")}),
                           _export("below_ro", {"type": "local", "path": str(read_only_dir / "b")})])
    code, out, lines = doctor(config)  # (two exports may not share or nest destinations)
    for name, path in (("ro_export", read_only_dir / "a"), ("below_ro", read_only_dir / "b")):
        line = fail_line(lines, f"destination {name}")
        assert f"local directory {path} is not writable" in line
        assert f"fix: make {path} writable" in line
    assert code == 1
    assert list(read_only_dir.iterdir()) == []  # the probe left nothing behind
    assert any(ln.startswith("[OK] source (SQLite)") for ln in lines)


@pytest.mark.parametrize("below", ["out", ""])
def test_a_destination_path_at_or_below_a_regular_file_names_the_file(tmp_path: Path, below: str) -> None:
    """Not "make it writable (chown/chmod)": the fix is to move the file or the path."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    target = blocker / below if below else blocker
    config = write_config(tmp_path, _sqlite_source(tmp_path),
                          [_export("e", {"type": "local", "path": str(target)})])
    code, _out, lines = doctor(config)
    line = fail_line(lines, "destination e")
    assert f"{blocker} is a file, not a directory, so the local destination {target} cannot be created" in line
    assert f"fix: move or rename {blocker}, or point destination.path at a directory" in line
    assert "chmod" not in line and code == 1


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_destination_inside_another_configs_data_folder_is_named_with_the_fix(
        tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
    """Another config published `out/`; this one writes `out/data/eb` — the config load cannot
    see the other config, so doctor says it (that export's gc refuses to clean while it is there)."""
    source = _sqlite_source(tmp_path)
    if kind == "local":
        outer, inner = {"type": "local", "path": str(tmp_path / "out")}, {"type": "local",
                                                                         "path": str(tmp_path / "out/data/eb")}
    else:
        s3 = request.getfixturevalue("s3")
        base = {"type": "s3", "bucket": s3.bucket, "endpoint": s3.endpoint, "region": "us-east-1",
                "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
        outer, inner = {**base, "prefix": "exports/out/"}, {**base, "prefix": "exports/out/data/eb/"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config_a = write_config(tmp_path / "a", source, [_export("items", outer)])
    config_b = write_config(tmp_path / "b", source, [_export("eb", inner)])
    code, out, _lines = doctor(config_b)
    assert code == 0, out  # nothing published around it yet
    assert rivet("run", "-c", str(config_a)).returncode == 0
    code, out, lines = doctor(config_b)
    line = fail_line(lines, "destination eb nesting")
    where = str(tmp_path / "out") if kind == "local" else f"{s3.bucket}/exports/out"
    assert f"inside the data/ folder of the export published at {where}" in line
    assert "fix: give this export (or the one at" in line and code == 1
    assert doctor(config_a)[0] == 0  # the outer export's own check is clean


@pytest.mark.s3
def test_s3_probe_passes_and_leaves_nothing_and_a_wrong_secret_fails_without_printing_it(
        tmp_path: Path, s3: Any) -> None:
    dest = {"type": "s3", "bucket": s3.bucket, "prefix": "exports/e/", "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    config = write_config(tmp_path, _sqlite_source(tmp_path), [_export("e", dest)])
    code, out, lines = doctor(config)
    assert code == 0, out
    assert any(ln.startswith(f"[OK] destination e: s3://{s3.bucket}/exports/e/") for ln in lines)
    assert s3.client().list_objects_v2(Bucket=s3.bucket).get("KeyCount", 0) == 0

    bad_secret = "Bad-Secret-" + WRONG
    code, out, lines = doctor(config, env={"RIVET_TEST_SK": bad_secret})
    line = fail_line(lines, "destination e")
    assert "fix:" in line and "secret_key_env" in line
    assert code == 1
    assert bad_secret not in out and s3.secret_key not in out


# ------------------------------------------------------------------------------- state
def test_a_state_store_path_that_is_a_directory_fails_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / ".rivet_state.db").mkdir()
    config = write_config(tmp_path, _sqlite_source(tmp_path), [_export("e", {"type": "local", "path": "out"})])
    code, _out, lines = doctor(config)
    line = fail_line(lines, "state store")
    assert "cannot open the state store" in line
    assert f"fix: make sure {tmp_path / '.rivet_state.db'} can be created and written" in line
    assert code == 1


def test_an_unreachable_state_server_fails_without_printing_its_password(tmp_path: Path) -> None:
    secret = "State-" + WRONG
    port = free_port()
    config = write_config(tmp_path, _sqlite_source(tmp_path), [_export("e", {"type": "local", "path": "out"})])
    code, out, lines = doctor(config, env={"RIVET_STATE_URL": f"postgresql://rivet:{secret}@127.0.0.1:{port}/st"})
    line = fail_line(lines, "state store")
    assert f"127.0.0.1:{port}" in line and "RIVET_STATE_URL" in line.split("fix:", 1)[1]
    assert code == 2
    assert secret not in out


def test_the_state_probe_changes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path, _sqlite_source(tmp_path), [_export("e", {"type": "local", "path": "out"})])
    assert doctor(config)[0] == 0
    db = tmp_path / ".rivet_state.db"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM run_status").fetchone()[0] == 0
    before = {t: sqlite3.connect(db).execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for (t,) in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert doctor(config)[0] == 0
    after = {t: sqlite3.connect(db).execute(f"SELECT count(*) FROM {t}").fetchone()[0]
             for (t,) in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert before == after


@pytest.mark.postgres
def test_a_state_role_that_may_only_read_fails_with_the_runs_own_verdict(tmp_path: Path, pg_url: str) -> None:
    """Doctor asks the state store what a run asks it before reading the source (the
    writability probe of rivet_core/state/writable.py), so both give the same verdict."""
    from rivet_core.state import StateStore

    StateStore.open(None, state_url=pg_url).close()  # the owner creates the state tables
    role = f"rivet_ro_{uuid.uuid4().hex[:10]}"
    db_exec(pg_url, f"CREATE ROLE {role} LOGIN", f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    parts = urllib.parse.urlsplit(pg_url)
    reader = urllib.parse.urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
    try:
        config = write_config(tmp_path, _sqlite_source(tmp_path), [_export("e", {"type": "local", "path": "out"})])
        code, _out, lines = doctor(config, env={"RIVET_STATE_URL": reader})
        line = fail_line(lines, "state store")
        assert "is not writable" in line and "permission denied" in line
        assert "could not record its cursor" in line
        assert "fix: an export would publish data" in line and "grant the RIVET_STATE_URL role" in line
        assert code == 1
        refused = rivet("run", "-c", str(config), env={"RIVET_STATE_URL": reader})
        assert refused.returncode == 1 and "could not record its cursor" in refused.stderr, refused.stderr
        assert not (tmp_path / "out" / "manifest.json").exists() and not list((tmp_path / "out").rglob("*.parquet"))
    finally:
        db_exec(pg_url, f"DROP OWNED BY {role}", f"DROP ROLE {role}")


# ------------------------------------------------------------------------ config / green
def test_a_broken_config_is_one_fail_line(tmp_path: Path) -> None:
    config = tmp_path / "rivet.yaml"
    config.write_text("source: {type: sqlite, url: 'sqlite:///x.db'}\nexports:\n  - name: e\n    tabel: items\n")
    code, _out, lines = doctor(config)
    line = fail_line(lines, "config")
    assert "tabel" in line and "fix:" in line
    assert code == 1


@pytest.mark.postgres
@pytest.mark.s3
def test_a_healthy_postgres_config_with_local_and_s3_destinations_is_all_ok(
        tmp_path: Path, pg_url: str, s3: Any) -> None:
    _items(pg_url)
    s3_dest = {"type": "s3", "bucket": s3.bucket, "prefix": "p/", "endpoint": s3.endpoint, "region": "us-east-1",
               "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    config = write_config(tmp_path, source_block(pg_url),
                          [_export("local_e", {"type": "local", "path": "out"}), _export("s3_e", s3_dest)])
    code, out, lines = doctor(config)
    assert code == 0, out
    assert [ln.split(":", 1)[0] for ln in lines[:-1]] == [
        "[OK] config", "[OK] source (PostgreSQL)", "[OK] read path (PostgreSQL)", "[OK] destination local_e",
        "[OK] destination s3_e",
        "[OK] state store", "[OK] staging"]
    assert lines[-1] == "All checks passed."

    code, out, _ = doctor(config, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] is True and doc["exit_code"] == 0
    assert {c["name"] for c in doc["checks"]} >= {"config", "source (PostgreSQL)", "state store"}


@pytest.mark.mysql
def test_a_healthy_mariadb_config_is_all_ok_and_json_reports_failures_too(tmp_path: Path, mysql_url: str) -> None:
    _items(mysql_url)
    config = write_config(tmp_path, source_block(mysql_url), [_export("e", {"type": "local", "path": "out"})])
    code, out, lines = doctor(config)
    assert code == 0, out
    assert lines[-1] == "All checks passed."

    (tmp_path / "blocker").write_text("file")
    bad = write_config(tmp_path, source_block(mysql_url), [_export("e", {"type": "local", "path": "blocker/x"})])
    code, out, _ = doctor(bad, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["exit_code"] == 1
    failed = [c for c in doc["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["destination e"] and failed[0]["fix"]
