"""Staging directories and their cleanup.

A run stages its parts under `<config dir>/.rivet/staging/<run_id>/` before publishing them.

- **Its own staging**: a run removes its directory when it ends, success or failure
  (`ExportRun.close`, which every ending path reaches: finalize, a refusal, an abandon), and
  the staging root with it when no other run stages there (`remove_staging`): a finished run
  leaves no empty `.rivet/staging/` beside the config, as Rivet leaves none.
- **Dead runs' staging**: a run killed hard (SIGKILL, OOM, power loss) cannot clean up; its
  directory stays. The next run of the SAME export, once it holds the export lock, removes
  the staging directories of that export's runs that are not alive (`sweep_dead_staging`).
  A directory is alive — never touched — when its run id is on a live (non-stale) lock row
  of the export (any lock key: the whole export, a time partition, a shared chunk worker,
  on any host), or when its owner file names a process on this host that still runs. Other
  exports' directories are never touched.
- `rivet doctor` lists what is left (`scan_staging`): count, bytes, path, live or not.

The owner file (`.rivet-owner.json`: pid, process start, host, export, run id) is written
when a run first stages (`claim_staging`); directories from before it existed are matched
to their export by the run-id shape `<export>_<YYYYMMDDTHHMMSS.mmm>[_<suffix>]`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rivet_core.state.process_identity import process_alive, process_start

log = logging.getLogger("rivet.staging")

OWNER_FILE = ".rivet-owner.json"
_RUN_STAMP = r"_\d{8}T\d{6}\.\d{3}(?:_[A-Za-z0-9_.-]+)?"


@dataclass(frozen=True)
class StagingDir:
    """One directory under the staging root."""

    path: Path
    run_id: str
    export_name: str | None  # None: neither an owner file nor a run-id shape names it
    bytes: int
    files: int
    live: bool
    owner: dict | None = None


def claim_staging(directory: Path, *, run_id: str, export_name: str) -> Path:
    """Create the run's staging directory with its owner file (idempotent)."""
    for _ in range(3):  # another run's `remove_staging` may drop the empty root in between
        try:
            directory.mkdir(parents=True, exist_ok=True)
            break
        except FileNotFoundError:
            continue
    else:
        directory.mkdir(parents=True, exist_ok=True)
    owner = directory / OWNER_FILE
    if not owner.exists():
        pid = os.getpid()
        tmp = directory / f".{OWNER_FILE}.{pid}.tmp"
        tmp.write_text(json.dumps({"pid": pid, "process_start": process_start(pid), "host": socket.gethostname(),
                                   "export_name": export_name, "run_id": run_id}))
        os.replace(tmp, owner)
    return directory


def remove_staging(directory: Path) -> None:
    """Remove a run's staging directory, then the staging root if that left it empty (a
    non-empty root — another run stages there — stays: `rmdir` refuses it)."""
    shutil.rmtree(directory, ignore_errors=True)
    with contextlib.suppress(OSError):
        directory.parent.rmdir()


def _owner(directory: Path) -> dict | None:
    try:
        data = json.loads((directory / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _owner_alive(owner: dict | None) -> bool:
    """True when the owner file names a process of this host that still runs."""
    if not owner or owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    return process_alive(owner["pid"], owner.get("process_start"))


def _size(directory: Path) -> tuple[int, int]:
    total = files = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                continue
    return total, files


def _export_of(name: str, owner: dict | None, exports: Iterable[str]) -> str | None:
    if owner and isinstance(owner.get("export_name"), str):
        return owner["export_name"]
    matches = [e for e in exports if re.fullmatch(re.escape(e) + _RUN_STAMP, name)]
    return max(matches, key=len) if matches else None


def scan_staging(root: Path, exports: Iterable[str], live_run_ids: set[str]) -> list[StagingDir]:
    """Every run directory under `root` with its size and whether its run is alive."""
    exports = list(exports)
    out: list[StagingDir] = []
    try:
        entries = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except FileNotFoundError:
        return out
    for path in entries:
        owner = _owner(path)
        run_id = owner.get("run_id") if owner and isinstance(owner.get("run_id"), str) else path.name
        size, files = _size(path)
        live = run_id in live_run_ids or path.name in live_run_ids or _owner_alive(owner)
        out.append(StagingDir(path, run_id, _export_of(path.name, owner, exports), size, files, live, owner))
    return out


def sweep_dead_staging(root: Path, export_name: str, live_run_ids: set[str], *, keep: str) -> list[StagingDir]:
    """Remove the staging directories of `export_name`'s dead runs (module docstring); the
    caller holds the export's lock. `keep`: the calling run's own directory name."""
    removed: list[StagingDir] = []
    for entry in scan_staging(root, [export_name], live_run_ids):
        if entry.export_name != export_name or entry.live or entry.path.name == keep:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not entry.path.exists():
            removed.append(entry)
            log.info("export '%s': removed staging left by dead run %s (%d bytes, %d files): %s",
                     export_name, entry.run_id, entry.bytes, entry.files, entry.path)
    return removed


__all__ = ["OWNER_FILE", "StagingDir", "claim_staging", "scan_staging", "sweep_dead_staging"]
