"""Run `rivet` with phase marks: where does start-up spend its time before the first query.

    RIVET_STARTUP_PHASES=out.json python benchmarks/startup_phases.py run -c rivet.yaml -e x

Used by benchmarks/startup.py (`--scenario startup`). It runs the `rivet` CLI in this process
and records, for a few moments on the run path, the wall time since the harness started the
process (`RIVET_STARTUP_T0`, epoch seconds) and this process's CPU time (user + system, which
a loaded machine does not inflate the way it inflates wall time). The marks are hooked when
their module is first imported (a `sys.meta_path` finder that wraps the loader), so the
wrapper changes neither what the run path imports nor when. Only the standard library is
imported here; the output is written at exit (an `atexit` handler, which the console
entry's prompt exit runs too). Each mark also says whether pyarrow was loaded by then.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

_T0 = float(os.environ.get("RIVET_STARTUP_T0", "0") or 0) or time.time()
MARKS: list[dict[str, Any]] = []
_SEEN: set[str] = set()


def mark(name: str, once: bool = True) -> None:
    """Record `name` now (the first time only when `once`)."""
    if once and name in _SEEN:
        return
    _SEEN.add(name)
    MARKS.append({"mark": name, "wall": time.time() - _T0, "cpu": time.process_time(),
                  "modules": len(sys.modules), "arrow": "pyarrow" in sys.modules})


def _wrap(obj: Any, attr: str, before: str | None, after: str | None,
          when: Callable[..., bool] | None = None) -> None:
    """Replace `obj.attr` (a function, or a classmethod of a class) with one that marks
    (only for the calls `when(*args, **kwargs)` accepts, when given)."""
    raw = obj.__dict__.get(attr) if isinstance(obj, type) else None
    is_classmethod = isinstance(raw, classmethod)
    func = raw.__func__ if is_classmethod else getattr(obj, attr)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        marks = when is None or when(*args, **kwargs)
        if before and marks:
            mark(before)
        result = func(*args, **kwargs)
        if after and marks:
            mark(after)
        return result

    setattr(obj, attr, classmethod(wrapper) if is_classmethod else wrapper)


def _hook_cli_run(mod: Any) -> None:
    _wrap(mod, "load", "run path imported", "config loaded")


def _hook_state(mod: Any) -> None:
    _wrap(mod.StateStore, "open", "state store opening", "state store opened")


def _hook_runner(mod: Any) -> None:
    _wrap(mod, "run_unit", "export run starts", "export run done")


def _hook_source(mod: Any) -> None:
    _wrap(mod, "open_source", "source opening", None)


#: The source's sessions say who they are (rivet_core/source/postgres/session.py); a
#: PostgreSQL state store (RIVET_STATE_URL) uses psycopg too, and its statements are not the
#: source's first query.
SOURCE_APPLICATION = "rivet"


def _source_connect(*_args: Any, **kwargs: Any) -> bool:
    return kwargs.get("application_name") == SOURCE_APPLICATION


def _source_statement(self: Any, *_args: Any, **_kwargs: Any) -> bool:
    conn = getattr(self, "connection", self)  # a cursor's connection, or the connection itself
    return conn.info.parameter_status("application_name") == SOURCE_APPLICATION


def _hook_psycopg(mod: Any) -> None:
    _wrap(mod, "connect", "source connect", "source connected", _source_connect)
    for cls in (mod.Connection, mod.Cursor, mod.ServerCursor):
        _wrap(cls, "execute", "first query", None, _source_statement)


def _hook_pymysql(mod: Any) -> None:
    _wrap(mod, "connect", "source connect", "source connected")
    _wrap(mod.cursors.Cursor, "execute", "first query", None)


HOOKS: dict[str, Callable[[Any], None]] = {
    "rivet_core.cli.run": _hook_cli_run, "rivet_core.state": _hook_state,
    "rivet_core.pipeline.runner": _hook_runner, "rivet_core.source": _hook_source,
    "psycopg": _hook_psycopg, "pymysql": _hook_pymysql,
}


class _PostImport(importlib.abc.MetaPathFinder):
    """Wraps the loader of a hooked module so the hook runs right after the module executes."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in HOOKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, hook = spec.loader, HOOKS[name]

        class Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                hook(module)

        spec.loader = Loader()
        return spec


def _write() -> None:
    mark("exit")
    out = os.environ.get("RIVET_STARTUP_PHASES")
    if out:
        with open(out, "w") as fh:
            json.dump(MARKS, fh)


def main() -> None:
    mark("python up")
    sys.meta_path.insert(0, _PostImport())
    atexit.register(_write)
    try:  # the console script's entry (a prompt exit after the command), where the tree has it
        from rivet_core.cli.entry import console as cli_main
    except ImportError:  # a baseline from before rivet_core/cli/entry.py: the click group
        from rivet_core.cli import main as cli_main

    mark("cli imported")
    sys.argv = ["rivet", *sys.argv[1:]]
    cli_main()


if __name__ == "__main__":
    main()
