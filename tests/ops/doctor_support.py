"""Fixtures for the `rivet doctor` tests: real broken things (imported by test_doctor.py;
tests/ops/conftest.py belongs to the init/check/plan tests).

Every "broken" fixture verifies that it really is broken for the user running the tests —
CI runs as root, and root ignores `chmod 0555`, so the read-only directory is a read-only
tmpfs mount (or an immutable directory, `chattr +i`) when running as root; the wrong
PostgreSQL password needs a role that authenticates with a password, which the trust-only
test server does not have until `pg_role_with_password` adds one pg_hba.conf line for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import mysql_exec, pg_exec


def free_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening (bound once by the OS, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _really_read_only(directory: Path) -> bool:
    probe = directory / f".probe-{uuid.uuid4().hex}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return True
    os.close(fd)
    probe.unlink()
    return False


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """An existing directory nobody running these tests can create files in — root included."""
    directory = tmp_path / "ro"
    directory.mkdir()
    undo: list[list[str]] = []
    if os.geteuid() != 0:
        directory.chmod(0o555)
    else:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(directory)],
                                 capture_output=True, text=True)
        if mounted.returncode == 0:
            undo.append(["umount", str(directory)])
        elif shutil.which("chattr") and subprocess.run(["chattr", "+i", str(directory)],
                                                       capture_output=True).returncode == 0:
            undo.append(["chattr", "-i", str(directory)])
    try:
        if not _really_read_only(directory):
            pytest.fail("could not make a directory read-only for the current user (root needs a tmpfs "
                        "mount or chattr +i; neither worked here)", pytrace=False)
        yield directory
    finally:
        for cmd in undo:
            subprocess.run(cmd, capture_output=True)
        with contextlib.suppress(OSError):
            directory.chmod(0o755)


@dataclass(frozen=True)
class PasswordRole:
    user: str
    password: str
    url: str  # with the right password

    def url_with(self, password: str) -> str:
        parts = urllib.parse.urlsplit(self.url)
        netloc = f"{self.user}:{urllib.parse.quote(password, safe='')}@{parts.hostname}:{parts.port}"
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture
def pg_role_with_password(pg_url: str) -> Iterator[PasswordRole]:
    """A login role that must authenticate with a password (scram-sha-256).

    The test server trusts every TCP login, so a wrong password would be accepted: one
    pg_hba.conf line for this role only is put first and the config reloaded (removed
    again afterwards). Needs the server's hba file on this machine (true for
    scripts/services.sh and CI)."""
    user = f"rivet_dr_{uuid.uuid4().hex[:10]}"
    password = f"Right-{uuid.uuid4().hex[:12]}"
    admin = os.environ["TEST_PG_DSN"]
    hba = Path(pg_exec(admin, "SHOW hba_file")[0][0])
    if not hba.is_file() or not os.access(hba, os.W_OK):
        pytest.fail(f"the wrong-password test edits the PostgreSQL server's pg_hba.conf ({hba}) but cannot "
                    "write it — run the tests on the server's machine (scripts/services.sh)", pytrace=False)
    db = urllib.parse.urlsplit(pg_url).path.lstrip("/")
    pg_exec(admin, f"CREATE ROLE {user} LOGIN PASSWORD '{password}'", f'GRANT CONNECT ON DATABASE "{db}" TO {user}')
    line = f"host all {user} 127.0.0.1/32 scram-sha-256\n"
    hba.write_text(line + hba.read_text())
    pg_exec(admin, "SELECT pg_reload_conf()")
    parts = urllib.parse.urlsplit(pg_url)
    url = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port}"))
    try:
        yield PasswordRole(user, password, url)
    finally:
        hba.write_text(hba.read_text().replace(line, "", 1))
        pg_exec(admin, "SELECT pg_reload_conf()")
        with contextlib.suppress(Exception):
            pg_exec(admin, f'REVOKE CONNECT ON DATABASE "{db}" FROM {user}')
            pg_exec(admin, f"DROP ROLE IF EXISTS {user}")


@pytest.fixture
def mysql_user_with_password(mysql_url: str) -> Iterator[PasswordRole]:
    """A MariaDB/MySQL user with a password and rights on the test database."""
    user = f"rivet_dr_{uuid.uuid4().hex[:10]}"
    password = f"Right-{uuid.uuid4().hex[:12]}"
    db = urllib.parse.urlsplit(mysql_url).path.lstrip("/")
    mysql_exec(mysql_url, f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
               f"GRANT SELECT ON `{db}`.* TO '{user}'@'%'")
    parts = urllib.parse.urlsplit(mysql_url)
    url = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port}"))
    try:
        yield PasswordRole(user, password, url)
    finally:
        mysql_exec(mysql_url, f"DROP USER IF EXISTS '{user}'@'%'")
