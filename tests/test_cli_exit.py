"""The `rivet` console script's prompt exit (rivet_core/cli/entry.py): after the command it runs
the atexit handlers, flushes, and leaves with the command's exit code without interpreter
teardown — and takes the normal exit when that could lose work (a live non-daemon thread, a
message exit). Each case runs `console()` in a child process with a stand-in command."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import REPO, rivet, write_config


def _child(body: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent("""
        import atexit, sys, threading
        import rivet_core.cli.entry as entry
        atexit.register(lambda: print("atexit ran", flush=True))
    """) + textwrap.dedent(body) + "\nentry.console()\nprint('not reached')\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_the_exit_code_passes_through_and_atexit_handlers_run() -> None:
    for code in (0, 3, 4):
        done = _child(f"""
            def command():
                print("x" * 200_000, end="")  # a large buffered write must reach the pipe whole
                raise SystemExit({code})
            entry.main = command
        """)
        assert done.returncode == code, done.stderr
        assert done.stdout.startswith("x" * 200_000) and done.stdout.endswith("atexit ran\n")
        assert "not reached" not in done.stdout


def test_a_live_non_daemon_thread_gets_the_normal_exit_that_waits_for_it() -> None:
    done = _child("""
        def command():
            release = threading.Event()
            def work():
                release.wait(0.3)  # the work in flight a prompt exit would cut off
                print("thread finished", flush=True)
            threading.Thread(target=work).start()
            raise SystemExit(0)
        entry.main = command
    """)
    assert done.returncode == 0, done.stderr
    assert "thread finished" in done.stdout


def test_a_message_exit_prints_its_message() -> None:
    done = _child("""
        def command():
            raise SystemExit("something went wrong")
        entry.main = command
    """)
    assert done.returncode == 1
    assert "something went wrong" in done.stderr


def test_rivet_run_through_the_console_entry_writes_its_json_and_exit_code(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 101)])
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"},
                          [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                            "destination": {"type": "local", "path": str(tmp_path / "out")}}])
    done = rivet("run", "-c", str(config), "-e", "t", "--json")  # python -m rivet_core.cli → entry.console
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert [r["status"] for r in runs] == ["success"]
    import pyarrow.parquet as pq

    table = pq.read_table(next((tmp_path / "out").rglob("*.parquet")))
    assert sorted(table.column("id").to_pylist()) == list(range(1, 101))
    bad = rivet("run", "-c", str(config), "-e", "nope")
    assert bad.returncode == 1 and "nope" in bad.stderr


def test_a_bad_command_line_exits_2_as_rivets_does() -> None:
    """docs/operations.md "Exit codes": a bad command line is 2, Rivet's code for it."""
    cases = {("run",): "Missing option '-c'", ("run", "-c", "x.yaml", "--valdiate"): "Did you mean '--validate'?",
             ("--bogus",): "No such option '--bogus'", ("nosuchcommand",): "No such command 'nosuchcommand'",
             ("state", "reset", "--bogus"): "No such option '--bogus'"}
    for args, message in cases.items():
        done = rivet(*args)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    assert rivet("--help").returncode == 0 and rivet("run", "--help").returncode == 0
    assert rivet("--version").returncode == 0


def test_a_bad_command_line_with_json_errors_is_one_json_line() -> None:
    done = rivet("--json-errors", "run", "-c", "x.yaml", "--valdiate")
    assert done.returncode == 2
    assert json.loads(done.stderr.strip()) == {
        "error": "No such option '--valdiate'. Did you mean '--validate'?", "exit_class": 2, "code": "RIVET_USAGE"}
