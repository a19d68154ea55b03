"""Destination trust artifacts: manifest v1, `_SUCCESS`, verification, quarantine moves.

Contracts (docs/invariants.md "M", docs/manifest.md): M1 parts before manifest (the caller
writes parts first), M2 manifest before `_SUCCESS` with marker = fingerprint of the exact
manifest bytes, M3 part identity, M4 canonical + immutable per-run copy, M5/M6
verification and legacy verdicts, M7 atomic writes, M9 quarantine never deletes.
docs/invariants.md I8: step 1 is `write_manifest_files`; step 2 is `verify_at_destination`.

Modules: `model` (dataclasses, serialize/parse, self-consistency, schema fingerprint),
`layout` (names, the `data/` layout, the marker's format, reading), `artifacts` (the
manifest write group: only the facades in rivet_core/pipeline/facade/ import it), `verify`,
`quarantine`, `retention` (what `rivet gc` / a `retention:` block moves aside and deletes).
"""

from rivet_core.manifest.layout import (
    DATA_PREFIX,
    DOCTOR_PROBE_KEY,
    MANIFEST_KEY,
    MAX_MANIFEST_BYTES,
    MAX_SUCCESS_BYTES,
    QUARANTINE_PREFIX,
    SUCCESS_KEY,
    data_key,
    is_sidecar,
    parse_success_marker,
    part_name,
    read_manifest,
    read_run_manifests,
    run_manifest_key,
    run_token,
)
from rivet_core.manifest.model import (
    MANIFEST_VERSION,
    PLACEHOLDER_SCHEMA_FINGERPRINT,
    ColumnChecksum,
    Manifest,
    ManifestDestination,
    ManifestError,
    ManifestExtraction,
    ManifestPart,
    ManifestSource,
    manifest_from_dict,
    manifest_to_dict,
    parse_manifest,
    schema_fingerprint,
    serialize_manifest,
    validate_self_consistency,
)
from rivet_core.manifest.quarantine import quarantine_key, quarantine_object
from rivet_core.manifest.verify import (
    ADVISORY_KINDS,
    COULD_NOT_VERIFY_KINDS,
    DEPTHS,
    Verification,
    VerifyFailure,
    verify_at_destination,
)

__all__ = [
    "Manifest", "ManifestPart", "ManifestSource", "ManifestDestination", "ManifestExtraction",
    "ColumnChecksum", "ManifestError", "MANIFEST_VERSION", "PLACEHOLDER_SCHEMA_FINGERPRINT",
    "serialize_manifest", "parse_manifest", "manifest_to_dict", "manifest_from_dict",
    "validate_self_consistency", "schema_fingerprint", "parse_success_marker",
    "read_manifest", "read_run_manifests", "verify_at_destination", "Verification", "VerifyFailure",
    "DEPTHS", "ADVISORY_KINDS", "COULD_NOT_VERIFY_KINDS", "MANIFEST_KEY", "SUCCESS_KEY",
    "DOCTOR_PROBE_KEY", "MAX_MANIFEST_BYTES", "MAX_SUCCESS_BYTES", "run_manifest_key", "run_token",
    "QUARANTINE_PREFIX", "is_sidecar", "quarantine_key", "quarantine_object",
    "DATA_PREFIX", "data_key", "part_name",
]
