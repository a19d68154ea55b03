"""A lost state store under an incremental export.

An incremental export's cursor lives in the state store. When the store is lost (deleted,
`RIVET_STATE_URL` pointed elsewhere, a new machine) the next run would silently export the
whole table again on top of the destination's data — 1 M duplicated rows, found later.

The destination still knows where the export stopped: its canonical `manifest.json`
records `source.extraction.cursor_high`. So a run of an incremental export whose store
knows nothing of it (no cursor AND no file-log row: `rivet state reset` keeps the file log,
so a deliberate reset still re-exports as documented) while the destination holds a
manifest of it with a cursor is refused (exit 3, nothing read or written) unless the
operator chooses:

- `--from-manifest`: adopt the manifest's `cursor_high` as the cursor and continue from it;
- `--full-refresh`: export everything again (the stored cursor, if any, is ignored).

Only the canonical manifest of THIS export counts (its `export_name` and cursor column must
match); an unreadable manifest is refused too rather than guessed around.
"""

from __future__ import annotations

from rivet_core.config import ExportConfig
from rivet_core.destination import Destination
from rivet_core.errors import ConfigError, DataIntegrityError, best_effort
from rivet_core.manifest import Manifest, read_manifest
from rivet_core.manifest.layout import is_run_copy
from rivet_core.redact import redact_secrets
from rivet_core.state import StateStore


class CursorLost(DataIntegrityError):
    """An incremental export has no cursor but its destination holds its data (exit 3)."""

    code = "cursor_lost"

    def __init__(self, message: str, *, export_name: str) -> None:
        super().__init__(message)
        self.export_name = export_name


def _options_hint(config_path: str, export_name: str) -> str:
    return (f"re-run with `rivet run -c {config_path} -e {export_name} --from-manifest` to continue from the "
            f"destination manifest's cursor_high, or with `--full-refresh` to export every row again")


def _manifest_cursor(manifest: Manifest, export: ExportConfig) -> str | None:
    extraction = manifest.source.extraction
    if extraction is None or extraction.cursor_high is None:
        return None
    return str(extraction.cursor_high)


def resolve_missing_cursor(state: StateStore, export: ExportConfig, dest: Destination, *, config_path: str,
                           from_manifest: bool) -> str | None:
    """Called for an incremental run whose store holds no cursor (and no --full-refresh).
    Returns the cursor to start from (None: a genuinely first run), or raises `CursorLost`."""
    if not dest.supports_manifest:
        if from_manifest:
            raise ConfigError(f"export '{export.name}': --from-manifest needs a destination with a manifest "
                              f"(local or s3), not {dest.kind}")
        return None
    known = False  # an unreadable file log knows nothing: the destination decides
    with best_effort("read the file log"):
        known = bool(state.list_files(export.name, 1))
    if known and not from_manifest:
        return None  # the cursor was reset on purpose (`rivet state reset`): re-export, as documented
    try:
        found = read_manifest(dest)
    except Exception as exc:  # noqa: BLE001 - an unreadable manifest is not guessed around
        raise CursorLost(
            f"export '{export.name}': the state store has no cursor for this incremental export and the "
            f"destination's manifest.json at {dest.uri} cannot be read ({redact_secrets(exc)}) — fix or remove "
            f"it, or {_options_hint(config_path, export.name).replace('re-run with', 're-run')}",
            export_name=export.name) from exc
    manifest = found[0] if found else None
    if manifest is None or manifest.export_name != export.name:
        if from_manifest:
            what = "no manifest.json" if manifest is None else f"a manifest of export '{manifest.export_name}'"
            raise ConfigError(f"export '{export.name}': --from-manifest found {what} at {dest.uri}, so there is "
                              "no cursor to adopt — run without --from-manifest (or with --full-refresh)")
        return None
    high = _manifest_cursor(manifest, export)
    extraction = manifest.source.extraction
    column = extraction.cursor_column if extraction is not None else None
    if from_manifest:
        if high is None:
            raise ConfigError(f"export '{export.name}': the manifest at {dest.uri} (run {manifest.run_id}) records "
                              "no cursor_high, so there is no cursor to adopt — use --full-refresh")
        if column is not None and column != export.cursor_column:
            raise ConfigError(f"export '{export.name}': the manifest at {dest.uri} records cursor column "
                              f"'{column}' but the export uses '{export.cursor_column}' — its cursor_high cannot "
                              "be adopted; use --full-refresh")
        return high
    if high is None:
        return None  # the manifest holds no cursor range (an empty first run): nothing to duplicate
    raise CursorLost(
        f"export '{export.name}': the state store has no cursor for this incremental export, but the destination "
        f"{dest.uri} already holds its data (manifest of run {manifest.run_id}: {manifest.row_count} row(s), "
        f"cursor '{column or export.cursor_column}' up to {high!r}) — the state store was lost or replaced "
        f"(check RIVET_STATE_URL / .rivet_state.db beside the config), and running now would export every row "
        f"again on top of them. Nothing was done; {_options_hint(config_path, export.name)}",
        export_name=export.name)


class PublishedDataGone(CursorLost):
    """An incremental export's cursor has moved past rows its destination no longer holds (exit 3)."""

    code = "published_data_gone"


def refuse_vanished_destination(state: StateStore, export: ExportConfig, dest: Destination, *,
                                config_path: str, cursor: str) -> None:
    """The inverse of a lost state store: the store holds a cursor, but the prefix it was
    published to no longer holds a `manifest.json` although the run ledger records successful
    runs there and no run copy `manifest-<run>.json` is left either (a deleted prefix, a wiped
    bucket). Continuing from the cursor would publish
    only the rows after it — every earlier row silently gone from the dataset. Refused
    (exit 3, nothing read or written) unless `--full-refresh` exports every row again.
    Silent when the ledger cannot answer: it is a second witness, never a reason to fail."""
    if not dest.supports_manifest or dest.head("manifest.json") is not None:
        return
    if any(is_run_copy(obj.key) for obj in dest.list("")):
        return  # the dataset's run copies are there (only manifest.json is not): its rows are not gone
    found = None
    with best_effort("read the run ledger"):
        found = state.published_runs(export.name, dest.uri)
    if found is None:
        return
    raise PublishedDataGone(
        f"export '{export.name}': the destination {dest.uri} has no manifest.json, but {found.evidence()} and the "
        f"cursor stands at {cursor!r} — the published data was removed, and continuing from the cursor would "
        f"publish only newer rows. Nothing was done; restore the prefix, or re-run with `rivet run -c "
        f"{config_path} -e {export.name} --full-refresh` to export every row again",
        export_name=export.name)


__all__ = ["CursorLost", "PublishedDataGone", "refuse_vanished_destination", "resolve_missing_cursor"]
