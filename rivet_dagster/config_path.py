"""Where a rivet.yaml named by a relative path is: the folder of the file that names it (a
`defs.yaml`, or the Python module calling `build_definitions` / `export_partitions_def`),
else the current directory. Its own module so the factory and the partitions helpers share
it without importing each other."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

from rivet_core import api


def resolve_config_path(config_path: str | os.PathLike[str], relative_to: Path | None) -> Path:
    """An absolute path as is; a relative one against `relative_to` (the folder of the file
    that names it: a `defs.yaml`, or the Python module calling `build_definitions`), else
    against the current directory. Neither found: a ConfigError naming both places."""
    path = Path(config_path)
    if path.is_absolute():
        return path
    candidates = ([relative_to / path] if relative_to is not None else []) + [Path.cwd() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    tried = " and ".join(f"'{c}'" for c in candidates)
    raise api.ConfigError(f"rivet config '{config_path}' not found (looked at {tried}) — give a path "
                          "relative to the file that names it, or an absolute path")


def caller_dir() -> Path | None:
    """The folder of the module that called the caller of this function (`build_definitions`,
    `export_partitions_def`): where a relative config path is looked up first."""
    frame = inspect.currentframe()
    try:
        outer = frame.f_back.f_back if frame and frame.f_back else None
        filename = outer.f_code.co_filename if outer else None
    finally:
        del frame
    if not filename or filename.startswith("<"):
        return None
    return Path(filename).resolve().parent
