"""Destination-side trust artifacts as a reader sees them: names, the `data/` layout, the
`_SUCCESS` marker's format, and reading the manifests.

Owns the layout and sidecar names (docs/rivet-compat.md "Manifest, verification and verdicts").
Writing them — the manifest write group (M2, M4, M7) — is `artifacts.py`, which only the
facades import (`.importlinter`, docs/adr/0001-write-ordering-facades.md); everything here
is safe for any module to use.
"""

from __future__ import annotations

import logging
import re

from rivet_core.destination.base import Destination
from rivet_core.destination.errors import DestinationError, destination_error
from rivet_core.manifest.model import Manifest, ManifestError, parse_manifest

MANIFEST_KEY = "manifest.json"
SUCCESS_KEY = "_SUCCESS"
QUARANTINE_PREFIX = "_quarantine/"
#: Data parts live under `data/`, apart from the manifests, run copies, `_SUCCESS` and
#: `_quarantine/`, so `<prefix>/data` is a folder of data files that pyarrow, DuckDB and
#: pandas read as a dataset (docs/adr/0007-readable-layout-and-retention.md). Manifest part
#: paths stay relative to the prefix (`data/<name>`); a prefix written before this layout
#: (parts at the root, as Rivet writes them) is read and verified unchanged.
DATA_PREFIX = "data/"
DOCTOR_PROBE_KEY = ".rivet_doctor_probe"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # DoS cap (docs/rivet-compat.md "Security")
MAX_SUCCESS_BYTES = 4096

_TOKEN_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_RUN_COPY = re.compile(r"^manifest-[^/]*\.json$")
log = logging.getLogger("rivet.manifest")
_MARKER = re.compile(r"^xxh3:[0-9a-f]{16}$")


def run_token(run_id: str) -> str:
    """`run_id` with every char outside `[A-Za-z0-9._-]` replaced by `-` (file-name safe)."""
    token = _TOKEN_UNSAFE.sub("-", run_id)
    # "." / ".." would be path components with meaning; never let a run id produce them.
    return token if token.strip(".") else token.replace(".", "-") or "-"


def run_manifest_key(run_id: str) -> str:
    """Key of the immutable per-run manifest copy: `manifest-<token>.json`."""
    return f"manifest-{run_token(run_id)}.json"


def data_key(name: str, layout: str = "data") -> str:
    """The key a new part called `name` is written to: `data/<name>`; with `layout: rivet`
    (Rivet's flat layout, docs/rivet-compat.md "File names and run ids") `<name>` at the root,
    which readers and gc already accept as the layout written before `data/` existed."""
    return name if layout == "rivet" else DATA_PREFIX + name


def part_name(key: str) -> str | None:
    """The file name of a part key in either layout (`data/<name>` or a root-level `<name>`
    written before `data/` existed); None for keys deeper in the tree or in `_quarantine/`."""
    rest = key[len(DATA_PREFIX):] if key.startswith(DATA_PREFIX) else key
    return None if "/" in rest or not rest else rest


def is_run_copy(key: str) -> bool:
    """`manifest-<run>.json` at the prefix root: one run's immutable manifest copy."""
    return "/" not in key and bool(_RUN_COPY.match(key))


def is_sidecar(key: str) -> bool:
    """True for keys verification never counts as data or untracked (docs/rivet-compat.md "Manifest, verification and verdicts").

    `manifest.json`, `_SUCCESS`, `manifest-*.json`, `.rivet_doctor_probe` at the prefix
    root, and anything under `_quarantine/`. Stray local staging temps (`.x.<pid>.<n>.tmp`
    left by a crash) are NOT sidecars: they are reported as untracked (advisory).
    """
    return (
        key in (MANIFEST_KEY, SUCCESS_KEY, DOCTOR_PROBE_KEY)
        or bool(_RUN_COPY.match(key))
        or key.startswith(QUARANTINE_PREFIX)
    )


def parse_success_marker(body: bytes) -> str | None:
    """Return the `xxh3:<16hex>` a marker body holds, or None if it is malformed.

    Accepted: at most 4096 bytes, UTF-8, exactly `xxh3:` + 16 lowercase hex, optionally
    followed by whitespace. Byte-level checks come first so hostile bodies cost nothing.
    """
    if len(body) > MAX_SUCCESS_BYTES:
        return None
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.rstrip()
    return text if _MARKER.match(text) else None


def read_manifest(dest: Destination, max_bytes: int = MAX_MANIFEST_BYTES,
                  key: str = MANIFEST_KEY) -> tuple[Manifest, bytes] | None:
    """Read and parse the canonical manifest; None when there is none (legacy prefix, M6).

    Raises `DestinationError` on I/O failure or when the object exceeds `max_bytes`
    (checked by head before download), `ManifestError` when it does not parse.
    """
    info = dest.head(key)
    if info is None:
        return None
    if info.size > max_bytes:
        raise destination_error(
            f"{key} at {dest.uri} is {info.size} bytes, over the {max_bytes}-byte limit — refusing to read it"
        )
    data = dest.read_bytes(key, max_bytes=max_bytes)
    return parse_manifest(data), data


def read_predecessor(dest: Destination) -> tuple[Manifest | None, int | None]:
    """The prefix's current `manifest.json` (the one the next publish replaces; None: there is
    none, or it cannot be read) and the `sequence` of the next publish (its place in the
    prefix's ledger, which gc orders runs by instead of a clock: manifest/retention.py): the
    current manifest's + 1; 1 when there is none or it was written before `sequence`
    existed; None when it cannot be read — gc then cannot place the run and spares the runs
    around it (retention.py, `_is_newer`). One read serves both (the finalize facade)."""
    try:
        found = read_manifest(dest)
    except (DestinationError, ManifestError) as exc:
        log.warning("the manifest.json at %s cannot be read (%s): the next publish gets no ledger sequence",
                    dest.uri, exc)
        return None, None
    if found is None:
        return None, 1
    previous = found[0]
    return previous, 1 if previous.sequence is None else previous.sequence + 1


def read_run_manifests(dest: Destination, max_bytes: int = MAX_MANIFEST_BYTES) -> list[Manifest]:
    """The per-run manifest copies at the prefix root (`manifest-<run>.json`) of successful
    runs, oldest first in the ledger's order (`ledger_order`). Copies that are too large, unreadable or do not parse are skipped
    with a warning: they list nothing a reader could trust."""
    found: list[Manifest] = []
    for obj in dest.list(""):
        if "/" in obj.key or not _RUN_COPY.match(obj.key) or obj.size > max_bytes:
            continue
        try:
            manifest = parse_manifest(dest.read_bytes(obj.key, max_bytes=max_bytes))
        except (DestinationError, ManifestError) as exc:
            log.warning("skipping run manifest '%s' at %s: %s", obj.key, dest.uri, exc)
            continue
        if manifest.status == "success":
            found.append(manifest)
    return sorted(found, key=ledger_order)


def ledger_order(manifest: Manifest) -> tuple[int, int | str, str]:
    """The order runs published in at one prefix: by `sequence` (`read_predecessor`), never by a
    clock a slow host falsifies; manifests written before `sequence` existed come first, among
    themselves by `finished_at`. manifest/retention.py orders its runs the same way."""
    if manifest.sequence is None:
        return (0, manifest.finished_at, manifest.run_id)
    return (1, manifest.sequence, manifest.run_id)


__all__ = [
    "is_run_copy", "read_run_manifests", "ledger_order", "read_predecessor", "DATA_PREFIX", "data_key", "part_name",
    "MANIFEST_KEY", "SUCCESS_KEY", "QUARANTINE_PREFIX", "DOCTOR_PROBE_KEY", "MAX_MANIFEST_BYTES",
    "MAX_SUCCESS_BYTES", "run_token", "run_manifest_key", "is_sidecar",
    "parse_success_marker", "read_manifest", "ManifestError",
]
