"""Manifest v1 data model: dataclasses, canonical serialization, hostile-input parsing.

Field names and meaning follow Rivet's `manifest_version` 1 (docs/manifest.md) so a reader
written for Rivet reads ours; `orchestrator` and `orchestrator_run_id` are our own optional
additions (readers ignore unknown fields). Manifests written before those names carried the
run id under a key named after the integration (`<name>_run_id`); `parse_manifest` still
reads that key (rivet_core/orchestrator.py). `serialize_manifest` produces THE bytes that are written and
fingerprinted by `_SUCCESS` (M2): pretty JSON, 2-space indent, fields in schema order,
optional fields omitted when None, trailing newline.

`parse_manifest` reads bytes that came back from a destination anyone may have written
to, so it validates every type and raises only `ManifestError` — never KeyError,
TypeError or RecursionError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import xxhash

from rivet_core.errors import DataIntegrityError
from rivet_core.orchestrator import (
    RUN_ID_KEY,
    display_name,
    legacy_run_id_attribute,
    legacy_run_id_name,
    with_legacy_run_id,
)

if TYPE_CHECKING:  # annotations only: `rivet validate` reads manifests without pyarrow
    import pyarrow as pa

MANIFEST_VERSION = 1
PLACEHOLDER_SCHEMA_FINGERPRINT = "xxh3:0000000000000000"
#: `source.extraction.strategy` labels, exactly as Rivet writes them (docs/rivet-compat.md "Manifest, verification and verdicts").
STRATEGY_LABELS = ("full", "incremental", "chunked", "keyset", "timewindow")
#: Labels manifests written before Rivet parity carried, and the label a reader sees instead.
LEGACY_STRATEGY_LABELS = {"time_window": "timewindow"}
_U32 = 2**32 - 1
_U64 = 2**64 - 1


class ManifestError(DataIntegrityError):
    """A manifest is malformed (bad JSON, wrong types, missing fields). Exit 3."""

    code = "RIVET_MANIFEST_INVALID"


@dataclass(frozen=True)
class ManifestExtraction:
    """`source.extraction`: how the rows were selected (cursor range for incremental)."""

    strategy: str
    cursor_column: str | None = None
    cursor_type: str | None = None
    cursor_low: str | int | float | None = None  # rendered cursor values, as the source gave them
    cursor_high: str | int | float | None = None
    source_row_count: int | None = None
    #: Time-window exports: the window's bounds (ISO 8601), `[window_start, window_end)`.
    window_start: str | None = None
    window_end: str | None = None


@dataclass(frozen=True)
class ManifestSource:
    engine: str
    schema: str | None
    table: str | None  # always written by us; Rivet's reader allows null (Option<String>)
    extraction: ManifestExtraction | None = None


@dataclass(frozen=True)
class ManifestDestination:
    kind: str
    uri: str


@dataclass(frozen=True)
class ColumnChecksum:
    name: str
    checksum: str  # decimal string (u64 wrapping sum; algorithm named by `checksum_render`)
    nulls: int | None = None  # null count (ours, rivet-colsum-v1; Rivet's entries omit it)


@dataclass(frozen=True)
class ManifestPart:
    """One committed data file. (path, size_bytes, content_fingerprint) is its identity (M3).

    Empty `content_fingerprint` / `content_md5` mean "unknown" (parts rehydrated from the
    state store's file_log): verification is then size-only.
    """

    part_id: int
    path: str
    rows: int
    size_bytes: int
    content_fingerprint: str = ""
    content_md5: str = ""
    status: str = "committed"
    #: Per-part Form B checksums (ours; optional, readers ignore it): the manifest's run-level
    #: `column_checksums` is their wrapping sum. None = not recorded (older manifests, CSV).
    column_checksums: tuple[ColumnChecksum, ...] | None = None

    def __post_init__(self) -> None:
        if self.column_checksums is not None:
            object.__setattr__(self, "column_checksums", tuple(
                c if isinstance(c, ColumnChecksum) else _column_checksum(c, f"parts[{self.part_id}].column_checksums")
                for c in self.column_checksums))


@dataclass(frozen=True)
class Manifest:
    """Run-level manifest. Dict/list arguments for the nested fields are converted."""

    run_id: str
    export_name: str
    started_at: str
    finished_at: str
    status: str  # running | success | failed | interrupted
    source: ManifestSource
    destination: ManifestDestination
    format: str
    schema_fingerprint: str
    row_count: int
    part_count: int
    parts: tuple[ManifestPart, ...] = ()
    compression: str | None = None
    mode: str = "batch"
    manifest_version: int = MANIFEST_VERSION
    export_family: str | None = None
    column_checksums: tuple[ColumnChecksum, ...] | None = None
    checksum_render: str | None = None
    checksum_key_column: str | None = None
    row_hash: Mapping[str, Any] | None = None
    split_window: Mapping[str, Any] | None = None
    #: The orchestrator that started the run (its display name) and its id for the run.
    orchestrator: str | None = None
    orchestrator_run_id: str | None = None
    #: `table_format:` exports: the table commit this manifest publishes
    #: ({format, uri, version, operation, files, rows}; rivet_core/tableformat/commit.py).
    table: Mapping[str, Any] | None = None
    #: The publish's place in the prefix's ledger: the previous `manifest.json`'s + 1
    #: (manifest/artifacts.py); gc orders runs by it, never by a clock (manifest/retention.py).
    sequence: int | None = None

    def __getattr__(self, name: str) -> Any:
        """`manifest.<name>_run_id` (before `orchestrator_run_id`) still reads, deprecated."""
        return legacy_run_id_attribute(self, name)

    def __post_init__(self) -> None:
        # Accept plain dicts/lists from builders; store typed, immutable values.
        if isinstance(self.source, Mapping):
            object.__setattr__(self, "source", _source(self.source, "source"))
        if isinstance(self.destination, Mapping):
            object.__setattr__(self, "destination", _destination(self.destination, "destination"))
        object.__setattr__(self, "parts", tuple(
            p if isinstance(p, ManifestPart) else _part(p, f"parts[{i}]") for i, p in enumerate(self.parts)
        ))
        if self.column_checksums is not None:
            object.__setattr__(self, "column_checksums", tuple(
                c if isinstance(c, ColumnChecksum) else _column_checksum(c, f"column_checksums[{i}]")
                for i, c in enumerate(self.column_checksums)
            ))

    @property
    def committed_parts(self) -> tuple[ManifestPart, ...]:
        return tuple(p for p in self.parts if p.status == "committed")


# ---------------------------------------------------------------------------------------
# serialization
# ---------------------------------------------------------------------------------------
def _drop_none(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v for k, v in pairs if v is not None}


def manifest_to_dict(m: Manifest) -> dict[str, Any]:
    """The JSON object of a manifest, keys in schema order (dicts keep insertion order)."""
    src = m.source
    extraction = None
    if src.extraction is not None:
        e = src.extraction
        extraction = _drop_none([
            ("strategy", e.strategy), ("cursor_column", e.cursor_column), ("cursor_type", e.cursor_type),
            ("cursor_low", e.cursor_low), ("cursor_high", e.cursor_high),
            ("source_row_count", e.source_row_count), ("window_start", e.window_start),
            ("window_end", e.window_end),
        ])
    # with the old run-id key last, for one release (docs/manifest.md "Deprecated keys")
    return with_legacy_run_id(_drop_none([
        ("manifest_version", m.manifest_version),
        ("run_id", m.run_id),
        ("export_name", m.export_name),
        ("export_family", m.export_family or None),
        ("mode", m.mode),
        ("started_at", m.started_at),
        ("finished_at", m.finished_at),
        ("status", m.status),
        # `schema` is always present (null when there is none), as Rivet writes it.
        ("source", {"engine": src.engine, "schema": src.schema, "table": src.table,
                    **({"extraction": extraction} if extraction is not None else {})}),
        ("destination", {"kind": m.destination.kind, "uri": m.destination.uri}),
        ("format", m.format),
        ("compression", m.compression),
        ("schema_fingerprint", m.schema_fingerprint),
        ("row_count", m.row_count),
        ("part_count", m.part_count),
        ("parts", [
            {"part_id": p.part_id, "path": p.path, "rows": p.rows, "size_bytes": p.size_bytes,
             "content_fingerprint": p.content_fingerprint, "content_md5": p.content_md5,
             "status": p.status,
             **({} if p.column_checksums is None else {"column_checksums": _checks(p.column_checksums)})}
            for p in m.parts
        ]),
        ("column_checksums", None if m.column_checksums is None else _checks(m.column_checksums)),
        ("checksum_render", m.checksum_render),
        ("checksum_key_column", m.checksum_key_column),
        ("row_hash", None if m.row_hash is None else dict(m.row_hash)),
        ("split_window", None if m.split_window is None else dict(m.split_window)),
        ("orchestrator", m.orchestrator),
        ("orchestrator_run_id", m.orchestrator_run_id),
        ("table", None if m.table is None else dict(m.table)),
        ("sequence", m.sequence),
    ]))


def _checks(checks: tuple[ColumnChecksum, ...]) -> list[dict[str, Any]]:
    return [_drop_none([("name", c.name), ("checksum", c.checksum), ("nulls", c.nulls)]) for c in checks]


def serialize_manifest(m: Manifest) -> bytes:
    """Canonical bytes of `m` — the exact bytes written and fingerprinted by `_SUCCESS`."""
    text = json.dumps(manifest_to_dict(m), indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------
# parsing (hostile input)
# ---------------------------------------------------------------------------------------
_MISSING = object()


def _get(obj: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...], *,
         required: bool = True, nullable: bool = False, default: Any = None) -> Any:
    value = obj.get(key, _MISSING)
    if value is _MISSING or (value is None and nullable):
        if value is _MISSING and required:
            raise ManifestError(f"manifest {where}: missing field '{key}'")
        return default
    if kind is int or kind == (int,):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ManifestError(f"manifest {where}.{key}: expected an integer, got {_tname(value)}")
        return value
    if not isinstance(value, kind):
        raise ManifestError(f"manifest {where}.{key}: expected {_kname(kind)}, got {_tname(value)}")
    return value


def _uint(obj: Mapping[str, Any], key: str, where: str, limit: int = _U64, **kw: Any) -> Any:
    value = _get(obj, key, where, int, **kw)
    if value is not None and not 0 <= value <= limit:
        raise ManifestError(f"manifest {where}.{key}: {value} is out of range (0..{limit})")
    return value


def _scalar(obj: Mapping[str, Any], key: str, where: str) -> Any:
    """An optional JSON scalar (cursor bounds may be strings or numbers)."""
    value = obj.get(key)
    if value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool)):
        return value
    raise ManifestError(f"manifest {where}.{key}: expected a string or number, got {_tname(value)}")


def _tname(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _kname(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({dict: "an object", list: "an array", str: "a string"}.get(k, k.__name__) for k in kinds)


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ManifestError(f"manifest {where}: expected an object, got {_tname(value)}")
    return value


def _extraction(value: Any, where: str) -> ManifestExtraction:
    o = _obj(value, where)
    return ManifestExtraction(
        strategy=normalize_strategy(_get(o, "strategy", where, str)),
        cursor_column=_get(o, "cursor_column", where, str, required=False, nullable=True),
        cursor_type=_get(o, "cursor_type", where, str, required=False, nullable=True),
        cursor_low=_scalar(o, "cursor_low", where),
        cursor_high=_scalar(o, "cursor_high", where),
        source_row_count=_uint(o, "source_row_count", where, required=False, nullable=True),
        window_start=_get(o, "window_start", where, str, required=False, nullable=True),
        window_end=_get(o, "window_end", where, str, required=False, nullable=True),
    )


def _source(value: Any, where: str) -> ManifestSource:
    o = _obj(value, where)
    ext = o.get("extraction")
    return ManifestSource(
        engine=_get(o, "engine", where, str),
        schema=_get(o, "schema", where, str, required=False, nullable=True),
        table=_get(o, "table", where, str, required=False, nullable=True),
        extraction=None if ext is None else _extraction(ext, where + ".extraction"),
    )


def _destination(value: Any, where: str) -> ManifestDestination:
    o = _obj(value, where)
    return ManifestDestination(kind=_get(o, "kind", where, str), uri=_get(o, "uri", where, str))


def _part(value: Any, where: str) -> ManifestPart:
    o = _obj(value, where)
    return ManifestPart(
        part_id=_uint(o, "part_id", where, _U32),
        path=_get(o, "path", where, str),
        rows=_uint(o, "rows", where),
        size_bytes=_uint(o, "size_bytes", where),
        content_fingerprint=_get(o, "content_fingerprint", where, str, required=False, nullable=True, default=""),
        content_md5=_get(o, "content_md5", where, str, required=False, nullable=True, default=""),
        status=_get(o, "status", where, str, required=False, nullable=True, default="committed"),
        column_checksums=_part_checks(o, where),
    )


def _part_checks(o: Mapping[str, Any], where: str) -> tuple[ColumnChecksum, ...] | None:
    raw = _get(o, "column_checksums", where, list, required=False, nullable=True)
    if raw is None:
        return None
    return tuple(_column_checksum(c, f"{where}.column_checksums[{i}]") for i, c in enumerate(raw))


def _column_checksum(value: Any, where: str) -> ColumnChecksum:
    o = _obj(value, where)
    nulls = _uint(o, "nulls", where) if o.get("nulls") is not None else None
    return ColumnChecksum(name=_get(o, "name", where, str), checksum=_get(o, "checksum", where, str), nulls=nulls)


def manifest_from_dict(o: Any) -> Manifest:
    """Build a `Manifest` from a decoded JSON value; raise `ManifestError` on any problem."""
    o = _obj(o, "root")
    w = "root"
    parts_raw = _get(o, "parts", w, list)
    checks_raw = _get(o, "column_checksums", w, list, required=False, nullable=True)
    row_hash = _get(o, "row_hash", w, dict, required=False, nullable=True)
    split_window = _get(o, "split_window", w, dict, required=False, nullable=True)
    if split_window is not None:
        _get(split_window, "key_column", "split_window", str)
    table = _get(o, "table", w, dict, required=False, nullable=True)
    if table is not None:
        _get(table, "format", "table", str)
        _uint(table, "version", "table")
    orchestrator = _get(o, "orchestrator", w, str, required=False, nullable=True)
    orchestrator_run_id = _get(o, RUN_ID_KEY, w, str, required=False, nullable=True)
    legacy = next((k for k in o if legacy_run_id_name(k) is not None), None)
    if orchestrator_run_id is None and legacy is not None:  # written before the neutral key
        orchestrator_run_id = _get(o, legacy, w, str, required=False, nullable=True)
        orchestrator = orchestrator or display_name(legacy_run_id_name(legacy) or legacy)
    return Manifest(
        manifest_version=_uint(o, "manifest_version", w, _U32),
        run_id=_get(o, "run_id", w, str),
        export_name=_get(o, "export_name", w, str),
        export_family=_get(o, "export_family", w, str, required=False, nullable=True) or None,
        mode=_get(o, "mode", w, str, required=False, nullable=True, default="batch"),
        started_at=_get(o, "started_at", w, str),
        finished_at=_get(o, "finished_at", w, str),
        status=_get(o, "status", w, str),
        source=_source(_get(o, "source", w, dict), "source"),
        destination=_destination(_get(o, "destination", w, dict), "destination"),
        format=_get(o, "format", w, str),
        compression=_get(o, "compression", w, str, required=False, nullable=True),
        schema_fingerprint=_get(o, "schema_fingerprint", w, str),
        row_count=_uint(o, "row_count", w),
        part_count=_uint(o, "part_count", w),
        parts=tuple(_part(p, f"parts[{i}]") for i, p in enumerate(parts_raw)),
        column_checksums=None if checks_raw is None else tuple(
            _column_checksum(c, f"column_checksums[{i}]") for i, c in enumerate(checks_raw)
        ),
        checksum_render=_get(o, "checksum_render", w, str, required=False, nullable=True),
        checksum_key_column=_get(o, "checksum_key_column", w, str, required=False, nullable=True),
        row_hash=row_hash,
        split_window=split_window,
        orchestrator=orchestrator,
        orchestrator_run_id=orchestrator_run_id,
        table=table,
        sequence=_uint(o, "sequence", w, required=False, nullable=True),
    )


def _reject_constant(name: str) -> Any:
    raise ManifestError(f"manifest is not valid JSON: {name} is not allowed")


def parse_manifest(data: bytes | bytearray | memoryview | str) -> Manifest:
    """Parse manifest bytes; unknown fields are ignored, anything malformed is ManifestError."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        value = json.loads(text, parse_constant=_reject_constant)
    except ManifestError:
        raise
    except UnicodeDecodeError as exc:
        raise ManifestError(f"manifest is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    except (ValueError, RecursionError) as exc:
        # json.JSONDecodeError is a ValueError; so is an over-long integer literal.
        raise ManifestError(f"manifest is not valid JSON: {str(exc)[:200]}") from exc
    except TypeError as exc:
        raise ManifestError(f"manifest must be bytes or str, got {type(data).__name__}") from exc
    try:
        return manifest_from_dict(value)
    except RecursionError as exc:  # pragma: no cover - json depth is bounded above
        raise ManifestError("manifest is nested too deeply") from exc


def validate_self_consistency(m: Manifest) -> list[str]:
    """Problems that make a manifest contradict itself (empty list = consistent)."""
    problems: list[str] = []
    if m.manifest_version != MANIFEST_VERSION:
        problems.append(f"manifest_version is {m.manifest_version}, expected {MANIFEST_VERSION}")
    committed = m.committed_parts
    if m.part_count != len(committed):
        problems.append(f"part_count is {m.part_count} but {len(committed)} parts are committed")
    total = sum(p.rows for p in committed)
    if m.row_count != total:
        problems.append(f"row_count is {m.row_count} but committed parts hold {total} rows")
    seen: set[int] = set()
    dups = sorted({p.part_id for p in m.parts if p.part_id in seen or seen.add(p.part_id)})
    if dups:
        problems.append(f"duplicate part_id(s): {', '.join(map(str, dups[:20]))}")
    return problems


def normalize_strategy(label: str) -> str:
    """The Rivet label of an extraction strategy: the labels we wrote before parity
    (`time_window`) read as Rivet's (`timewindow`); any other label is kept as it is (a
    reader ignores what it does not know)."""
    return LEGACY_STRATEGY_LABELS.get(label, label)


_RUST_TIME_UNITS = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}
_RUST_SIMPLE_TYPES = {
    "null": "Null", "bool": "Boolean", "int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
    "uint8": "UInt8", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64", "halffloat": "Float16",
    "float": "Float32", "double": "Float64", "string": "Utf8", "large_string": "LargeUtf8",
    "string_view": "Utf8View", "binary": "Binary", "large_binary": "LargeBinary",
    "binary_view": "BinaryView", "date32[day]": "Date32", "date64[ms]": "Date64",
}


def rust_arrow_type_name(t: pa.DataType) -> str:
    """The Arrow type as Rivet renders it in its schema fingerprint and drift baseline: the
    Rust `arrow` crate's `Debug` of `DataType` (`Int64`, `Utf8`, `Timestamp(Microsecond,
    None)`, `Timestamp(Microsecond, Some("UTC"))`, `Decimal128(38, 18)`, …). Extension types
    (uuid, json) render as their storage type, as in Rust. See docs/manifest.md."""
    import pyarrow as pa

    if isinstance(t, pa.ExtensionType):
        return rust_arrow_type_name(t.storage_type)
    name = str(t)
    if name in _RUST_SIMPLE_TYPES:
        return _RUST_SIMPLE_TYPES[name]
    if pa.types.is_timestamp(t):
        tz = "None" if t.tz is None else f'Some("{t.tz}")'
        return f"Timestamp({_RUST_TIME_UNITS[t.unit]}, {tz})"
    if pa.types.is_time32(t):
        return f"Time32({_RUST_TIME_UNITS[t.unit]})"
    if pa.types.is_time64(t):
        return f"Time64({_RUST_TIME_UNITS[t.unit]})"
    if pa.types.is_duration(t):
        return f"Duration({_RUST_TIME_UNITS[t.unit]})"
    if pa.types.is_decimal128(t):
        return f"Decimal128({t.precision}, {t.scale})"
    if pa.types.is_decimal256(t):
        return f"Decimal256({t.precision}, {t.scale})"
    if pa.types.is_fixed_size_binary(t):
        return f"FixedSizeBinary({t.byte_width})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        kind = "List" if pa.types.is_list(t) else "LargeList"
        f = t.value_field
        # arrow-rs >= 57 prints a Field without its default members (no dict_id / metadata).
        return (f'{kind}(Field {{ name: "{f.name}", data_type: {rust_arrow_type_name(f.type)}, '
                f"nullable: {'true' if f.nullable else 'false'} }})")
    return name  # anything else: pyarrow's own name (no Rivet export writes one)


def schema_fingerprint(schema: pa.Schema) -> str:
    """Rivet's schema fingerprint (docs/manifest.md): `xxh3:` + 16 lowercase
    hex of xxh3-64 over `name\\ttype\\n` of every column, sorted by name (byte order),
    where `type` is the Rust Arrow type name (`rust_arrow_type_name`)."""
    text = "".join(f"{f.name}\t{rust_arrow_type_name(f.type)}\n"
                   for f in sorted(schema, key=lambda f: f.name.encode("utf-8")))
    return "xxh3:" + xxhash.xxh3_64_hexdigest(text.encode("utf-8"))


def cursor_native_type(schema: pa.Schema | None, column: str | None) -> str | None:
    """The manifest's `extraction.cursor_type`: the source's own type name of the cursor
    column (the `rivet.native_type` field metadata every source sets, e.g. `timestamptz`),
    so a reader compares `cursor_low`/`cursor_high` as that type and not as text; None
    when the column or its metadata is absent."""
    if schema is None or column is None or schema.get_field_index(column) < 0:
        return None
    meta = schema.field(column).metadata or {}
    native = meta.get(b"rivet.native_type")
    return native.decode() if native else None


__all__ = [
    "cursor_native_type", "MANIFEST_VERSION", "PLACEHOLDER_SCHEMA_FINGERPRINT", "ManifestError", "Manifest", "ManifestPart",
    "ManifestSource", "ManifestDestination", "ManifestExtraction", "ColumnChecksum",
    "serialize_manifest", "parse_manifest", "manifest_to_dict", "manifest_from_dict",
    "validate_self_consistency", "schema_fingerprint", "rust_arrow_type_name", "normalize_strategy",
    "STRATEGY_LABELS", "LEGACY_STRATEGY_LABELS",
]
