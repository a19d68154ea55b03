"""Arrow and NumPy imported on first use, not when a module that names them is imported.

`rivet run` takes the export lock and connects to the source before it handles a single
Arrow value; importing pyarrow (and numpy, which pyarrow imports eagerly) costs ~0.25 s of
CPU, ~150 modules. The modules on the way to the first source query (the source sessions,
their type mappings, batching, the run's plan) name Arrow through these proxies, so that
cost is paid once a schema is built — after the first query (issue 16 item 3; pinned by
tests/test_startup.py `test_the_first_source_query_is_sent_before_pyarrow_is_imported`).

    from rivet_core.lazy_modules import pa   # `pa.int64()` imports pyarrow on first use

Type checkers see the real modules. At run time each name is a `LazyModule`: the first
attribute read imports the module (importlib's own per-module locks make that thread-safe)
and every attribute handed out is kept on the proxy, so later reads are plain attribute
lookups. A module-level expression that reads an attribute (a constant built from
`pa.int64()`, a tuple of Arrow exception classes) imports the library at once: keep those
inside functions (`functools.cache`) in the modules on the path to the first query.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["LazyModule", "np", "pa", "pc", "pq"]


class LazyModule:
    """A stand-in for the module `name` that imports it on the first attribute read."""

    def __init__(self, name: str) -> None:
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self.__dict__["_lazy_name"]), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_lazy_name']!r}>"


if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    np = LazyModule("numpy")
    pa = LazyModule("pyarrow")
    pc = LazyModule("pyarrow.compute")
    pq = LazyModule("pyarrow.parquet")
