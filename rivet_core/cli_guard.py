"""`lazy_guard`: the CLI's error boundary (`rivet_core.cli._guard`) for commands defined in
their own modules.

`cli.py` imports those modules to register them, so they cannot import `cli` while
loading: under `python -m rivet_core.cli` the module runs as `__main__`, and a load-time
`from rivet_core.cli import _guard` would import a second copy of cli.py that in turn
imports the half-loaded command module. Looking `_guard` up when the command runs avoids
the cycle and keeps one error boundary (one `Error:` line, exit codes, redaction).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def lazy_guard(fn: Callable[..., int | None]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from rivet_core.cli import _guard

        _guard(fn)(*args, **kwargs)

    return wrapper
