"""The `rivet` console script (and `python -m rivet_core.cli`): the command, then a prompt exit.

Why: once the last export has been written, reported and its state store closed, the
interpreter's own teardown — clearing every module's globals, collecting garbage, returning
Arrow's memory pool — still took 0.3–0.7 s of a 1 M-row `rivet run` (measured from the
command's return to the process's exit, docs/benchmarks.md "Exit"), a fixed cost every
short export and every scheduled run pays for nothing. So after the command returns,
`console` runs what a normal exit must run — the `atexit` handlers (logging's flush,
`weakref.finalize` cleanups such as temporary directories) — flushes stdout and stderr, and
leaves with `os._exit` and the command's exit code.

Before the command runs, `console` also turns off pydantic's plugin discovery for this
process (unless the environment already says otherwise): pydantic reads the entry points of
every installed distribution when the first model class is built, ~20 ms of every command's
start-up (docs/benchmarks.md "Parquet dictionaries only where values repeat"), and the
command's only models are its config's, which no plugin needs. Setting
`PYDANTIC_DISABLE_PLUGINS` (empty to keep every plugin) overrides it.

It falls back to the normal exit whenever skipping teardown could lose work: a non-daemon
thread still alive (a library's work in flight, which the normal exit would wait for), or an
exit code that is not a number (a `SystemExit("message")` prints its message). The click
group itself (`rivet_core.cli.main`) is untouched, so in-process callers (tests, embedders)
keep their normal `SystemExit`.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from rivet_core.cli.app import main


def _other_live_threads() -> bool:
    """A non-daemon thread other than this one is alive (the normal exit would join it)."""
    current = threading.current_thread()
    return any(t is not current and t.is_alive() and not t.daemon for t in threading.enumerate())


def console() -> None:
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # see the module docstring
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int) or _other_live_threads():
        sys.exit(code)
    atexit._run_exitfuncs()  # what a normal exit runs before teardown: logging, finalizers
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`rivet … | head`): nothing left to write
            pass
    os._exit(code)
