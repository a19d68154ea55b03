"""rivet_core/state/process_identity.py: who a pid is, without psutil on Linux.

Lock rows and staging owner files written by a run that used psutil must compare equal with
what this code computes for the same process, or a live holder would look recycled and be
swept. psutil (a dependency of the project) is the oracle here. That a real run loads no
psutil at all: tests/test_startup.py `test_a_run_locks_and_claims_its_staging_without_psutil`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from rivet_core.state import process_identity
from rivet_core.state.process_identity import process_alive, process_start


def _psutil_start(pid: int) -> str:
    return f"{psutil.Process(pid).create_time():.3f}"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A live child that waits on its stdin (closed by the test or the teardown)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_start_time_is_psutils_value_for_this_process_and_a_child(child: subprocess.Popen[bytes]) -> None:
    assert process_start(os.getpid()) == _psutil_start(os.getpid())
    assert process_start(child.pid) == _psutil_start(child.pid)


def test_a_live_process_with_its_start_time_is_alive(child: subprocess.Popen[bytes]) -> None:
    started = process_start(child.pid)
    assert process_alive(child.pid, started)
    assert process_alive(child.pid, None)  # nothing recorded: the pid decides


def test_another_start_time_means_a_recycled_pid(child: subprocess.Popen[bytes]) -> None:
    started = process_start(child.pid)
    assert started is not None
    assert not process_alive(child.pid, f"{float(started) - 100:.3f}")


def test_a_zombie_is_not_alive(child: subprocess.Popen[bytes]) -> None:
    started = process_start(child.pid)
    child.kill()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
    assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
    assert not process_alive(child.pid, started)
    assert not process_alive(child.pid, None)


def test_a_reaped_process_is_not_alive_and_has_no_start(child: subprocess.Popen[bytes]) -> None:
    started = process_start(child.pid)
    child.stdin.close()  # type: ignore[union-attr]
    child.wait()
    assert not process_alive(child.pid, started)
    assert process_start(child.pid) is None


def test_without_proc_psutil_answers(child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux without /proc mounted (or another system): psutil gives the same answers, and an
    unreadable /proc never makes a live holder look dead."""
    monkeypatch.setattr(process_identity, "_PROC", "/nonexistent-proc")
    process_identity._procfs.cache_clear()
    try:
        assert not process_identity._procfs()
        assert process_start(child.pid) == _psutil_start(child.pid)
        assert process_alive(child.pid, process_start(child.pid))
    finally:
        process_identity._procfs.cache_clear()

