"""The manifest write group — the only code that writes `manifest.json`, its run copy and
`_SUCCESS` (docs/adr/0001-write-ordering-facades.md; only `rivet_core.pipeline.facade`
imports this module, `.importlinter` enforces it).

M2 (manifest before `_SUCCESS`, marker = fingerprint of the exact manifest bytes), M4 (one
canonical manifest replaced atomically + an immutable per-run copy) and M7 (every write
atomic to readers). docs/invariants.md I8: step 1 calls `write_manifest_files` and fails
the run if it raises. The names and the reading side are `layout.py`.

This group writes what it is given; the finalize never gives it a failed run's manifest
(docs/adr/0002-failed-runs-keep-the-last-good-manifest.md: a failed run writes only its
per-run copy). A `_SUCCESS` that no longer matches the manifest — a prefix Rivet wrote after
a failed run — is never deleted here: verification reports `success_marker_stale`, an
honest verdict that also makes `--resume` refuse without `--force`.
"""

from __future__ import annotations

from rivet_core.destination.base import Destination
from rivet_core.destination.checksums import xxh3_fingerprint
from rivet_core.destination.errors import destination_error
from rivet_core.manifest.layout import MANIFEST_KEY, SUCCESS_KEY, run_manifest_key
from rivet_core.manifest.model import Manifest, serialize_manifest


def success_marker_body(manifest_bytes: bytes) -> bytes:
    """`_SUCCESS` body: `xxh3:<16 lowercase hex of xxh3_64(manifest bytes)>\\n` (M2)."""
    return (xxh3_fingerprint(manifest_bytes) + "\n").encode("ascii")


def write_manifest_files(dest: Destination, manifest: Manifest) -> bytes:
    """THE ordered write group for a run's manifest (I8 step 1, M2, M4, M7).

    Serialize once → canonical `manifest.json` → run-unique `manifest-<token>.json` (same
    bytes) → `_SUCCESS` if and only if `status == "success"`. Each write is an atomic
    `write_bytes`; the first failure raises and stops the sequence, so a marker never
    exists for manifest bytes that did not land. Returns the manifest bytes.
    Raises `DestinationError` for destinations without manifests (stdout) — callers check
    `dest.supports_manifest` first; a manifest must never end up in a data stream.
    """
    if not dest.supports_manifest:
        raise destination_error(f"{dest.kind} destination cannot hold a manifest — skip finalize for it")
    data = serialize_manifest(manifest)
    dest.write_bytes(data, MANIFEST_KEY)
    dest.write_bytes(data, run_manifest_key(manifest.run_id))
    if manifest.status == "success":
        dest.write_bytes(success_marker_body(data), SUCCESS_KEY)
    return data


__all__ = ["success_marker_body", "write_manifest_files"]
