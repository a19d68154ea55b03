"""Manifest v1, `_SUCCESS`, the manifest write group and `verify_at_destination`.

Verification verdicts run against BOTH a local directory and the real S3 server.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.destination import (
    Destination,
    DestinationSpec,
    ObjectInfo,
    WriteResult,
    open_destination,
)
from rivet_core.destination.checksums import Fingerprint
from rivet_core.destination.errors import destination_error
from rivet_core.errors import DestinationError
from rivet_core.manifest import (
    MANIFEST_KEY,
    QUARANTINE_PREFIX,
    SUCCESS_KEY,
    Manifest,
    ManifestError,
    ManifestPart,
    Verification,
    VerifyFailure,
    is_sidecar,
    parse_manifest,
    parse_success_marker,
    quarantine_object,
    read_manifest,
    run_manifest_key,
    schema_fingerprint,
    serialize_manifest,
    validate_self_consistency,
    verify_at_destination,
)
from rivet_core.manifest.artifacts import success_marker_body, write_manifest_files

RUN_ID = "orders_20260101T120000.123"


from tests.s3_area import S3Area, fresh_prefix, s3_module_bucket  # noqa: E402,F401 - shared fixture


@pytest.fixture
def s3(s3_module_bucket: S3Area) -> S3Area:
    """Overrides conftest's `s3`: the module's bucket, a fresh prefix per test."""
    return fresh_prefix(s3_module_bucket)


def make_manifest(parts: list[ManifestPart], status: str = "success", **kw: Any) -> Manifest:
    fields: dict[str, Any] = dict(
        run_id=RUN_ID, export_name="orders", started_at="2026-01-01T12:00:00.123Z",
        finished_at="2026-01-01T12:00:05.000Z", status=status,
        source={"engine": "postgres", "schema": "public", "table": "orders",
                "extraction": {"strategy": "incremental", "cursor_column": "updated_at",
                               "cursor_low": "2025-12-31T00:00:00", "cursor_high": "2026-01-01T00:00:00"}},
        destination={"kind": "local", "uri": "file:///tmp/x/"}, format="parquet", compression="zstd",
        schema_fingerprint="xxh3:0123456789abcdef", row_count=sum(p.rows for p in parts),
        part_count=len(parts), parts=parts,
    )
    fields.update(kw)
    return Manifest(**fields)


def part_from(res: WriteResult, part_id: int, rows: int = 10) -> ManifestPart:
    return ManifestPart(part_id=part_id, path=res.key, rows=rows, size_bytes=res.size,
                        content_fingerprint=res.xxh3, content_md5=res.md5_b64)


def publish_run(dest: Destination, tmp_path: Path, n: int = 3, status: str = "success") -> tuple[Manifest, bytes]:
    """Write n parts (M1) then the manifest group, as the finalize sequence does."""
    parts = []
    for i in range(n):
        staged = tmp_path / f"staged-{i}.parquet"
        staged.write_bytes(os.urandom(1000 + i))
        parts.append(part_from(dest.write_file(staged, f"orders_{i}.parquet"), i + 1))
    m = make_manifest(parts, status=status)
    return m, write_manifest_files(dest, m)


# ---------------------------------------------------------------------------------------
# model: serialization and parsing
# ---------------------------------------------------------------------------------------
def test_serialized_manifest_is_pretty_ordered_json_with_a_trailing_newline() -> None:
    m = make_manifest([ManifestPart(1, "a.parquet", 5, 100, "xxh3:00000000000000aa", "md5==")])
    data = serialize_manifest(m)
    assert data.endswith(b"}\n") and data.startswith(b'{\n  "manifest_version": 1,\n  "run_id": ')
    obj = json.loads(data)
    assert list(obj)[:10] == ["manifest_version", "run_id", "export_name", "mode", "started_at",
                              "finished_at", "status", "source", "destination", "format"]
    assert obj["parts"][0] == {"part_id": 1, "path": "a.parquet", "rows": 5, "size_bytes": 100,
                               "content_fingerprint": "xxh3:00000000000000aa", "content_md5": "md5==",
                               "status": "committed"}
    for absent in ("export_family", "column_checksums", "row_hash", "split_window", "orchestrator",
                   "orchestrator_run_id"):
        assert absent not in obj
    assert "cursor_type" not in obj["source"]["extraction"]
    assert serialize_manifest(m) == data  # deterministic


def test_serialize_then_parse_round_trips_every_field() -> None:
    m = make_manifest(
        [ManifestPart(1, "a.parquet", 5, 100, "xxh3:00000000000000aa", ""),
         ManifestPart(2, "b.parquet", 7, 120)],
        export_family="orders_fam", column_checksums=[{"name": "id", "checksum": "18446744073709551615"}],
        checksum_render="xxh3-64-sum-v2", checksum_key_column="id", row_hash={"columns": ["id"], "algo": "x"},
        split_window={"key_column": "id", "lo": "0", "hi": "100"}, orchestrator="Scheduler",
        orchestrator_run_id="d-1",
    )
    back = parse_manifest(serialize_manifest(m))
    assert back == m
    assert serialize_manifest(back) == serialize_manifest(m)


def test_parse_ignores_unknown_fields_and_defaults_mode_to_batch() -> None:
    obj = json.loads(serialize_manifest(make_manifest([])))
    del obj["mode"]
    obj["future_field"] = {"anything": [1, 2]}
    obj["parts"] = [{"part_id": 1, "path": "p", "rows": 1, "size_bytes": 2, "extra": True}]
    m = parse_manifest(json.dumps(obj).encode())
    assert m.mode == "batch" and m.parts[0].content_fingerprint == "" and m.parts[0].status == "committed"


@pytest.mark.parametrize("mutate, match", [
    (lambda o: o.pop("run_id"), "missing field 'run_id'"),
    (lambda o: o.update(row_count="12"), "row_count: expected an integer"),
    (lambda o: o.update(row_count=True), "row_count: expected an integer"),
    (lambda o: o.update(row_count=-1), "out of range"),
    (lambda o: o.update(parts={"a": 1}), "parts: expected an array"),
    (lambda o: o.update(parts=[1]), r"parts\[0\]: expected an object"),
    (lambda o: o.update(source=[]), "source: expected an object"),
    (lambda o: o["source"].update(engine=None), "source.engine: expected a string, got null"),
    (lambda o: o.update(destination={"kind": "s3"}), "missing field 'uri'"),
])
def test_parse_rejects_wrong_types_with_a_manifest_error_naming_the_field(mutate: Any, match: str) -> None:
    obj = json.loads(serialize_manifest(make_manifest([])))
    mutate(obj)
    with pytest.raises(ManifestError, match=match):
        parse_manifest(json.dumps(obj).encode())


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b"null", b"\xff\xfe{}", b'{"row_count": NaN}',
                                  b"[" * 100_000, b'{"a": 1' + b"0" * 5000 + b"}"])
def test_parse_rejects_malformed_bytes_with_manifest_error(data: bytes) -> None:
    with pytest.raises(ManifestError):
        parse_manifest(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
_VALID = json.loads(serialize_manifest(make_manifest([ManifestPart(1, "a", 1, 1)])))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_parse_of_any_json_value_raises_only_manifest_error(value: Any) -> None:
    try:
        parse_manifest(json.dumps(value).encode())
    except ManifestError:
        pass


@settings(max_examples=300)
@given(st.data(), JSON)
def test_parse_of_a_valid_manifest_with_one_field_replaced_raises_only_manifest_error(
    data: st.DataObject, value: Any
) -> None:
    obj = json.loads(json.dumps(_VALID))
    target = data.draw(st.sampled_from([obj, obj["source"], obj["source"]["extraction"], obj["destination"],
                                        obj["parts"][0]]))
    target[data.draw(st.sampled_from(sorted(target)))] = value
    try:
        m = parse_manifest(json.dumps(obj).encode())
    except ManifestError:
        return
    validate_self_consistency(m)
    serialize_manifest(m)


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_parse_of_arbitrary_bytes_raises_only_manifest_error(data: bytes) -> None:
    try:
        parse_manifest(data)
    except ManifestError:
        pass


def test_self_consistency_reports_every_contradiction() -> None:
    parts = [ManifestPart(1, "a", 5, 1), ManifestPart(1, "b", 5, 1), ManifestPart(3, "c", 9, 1, status="quarantined")]
    m = make_manifest(parts, manifest_version=2, row_count=19, part_count=3)
    problems = validate_self_consistency(m)
    assert any("manifest_version is 2" in p for p in problems)
    assert any("part_count is 3 but 2 parts are committed" in p for p in problems)
    assert any("row_count is 19 but committed parts hold 10 rows" in p for p in problems)
    assert any("duplicate part_id(s): 1" in p for p in problems)
    assert validate_self_consistency(make_manifest(parts[:1])) == []


def test_schema_fingerprint_is_xxh3_over_sorted_name_tab_type_lines() -> None:
    # Rivet's algorithm: the type is the Rust Arrow name (`Int64`, `Utf8`), not pyarrow's.
    schema = pa.schema([("b", pa.string()), ("a", pa.int64())])
    expected = "xxh3:" + xxhash.xxh3_64_hexdigest(b"a\tInt64\nb\tUtf8\n")
    assert schema_fingerprint(schema) == expected
    assert schema_fingerprint(pa.schema([("a", pa.int64()), ("b", pa.string())])) == expected
    assert schema_fingerprint(pa.schema([("a", pa.int32()), ("b", pa.string())])) != expected


def test_success_marker_body_is_xxh3_of_the_exact_manifest_bytes() -> None:
    data = serialize_manifest(make_manifest([]))
    assert success_marker_body(data) == f"xxh3:{xxhash.xxh3_64_hexdigest(data)}\n".encode()
    assert parse_success_marker(success_marker_body(data)) == success_marker_body(data).decode().strip()


@pytest.mark.parametrize("body, ok", [
    (b"xxh3:0123456789abcdef\n", True), (b"xxh3:0123456789abcdef \r\n\t", True),
    (b"xxh3:0123456789ABCDEF\n", False), (b" xxh3:0123456789abcdef", False), (b"xxh3:0123", False),
    (b"sha1:0123456789abcdef", False), (b"\xff\xfe", False), (b"xxh3:0123456789abcdef" + b" " * 5000, False),
])
def test_success_marker_parser_accepts_only_the_canonical_form(body: bytes, ok: bool) -> None:
    assert (parse_success_marker(body) is not None) is ok


def test_run_manifest_key_sanitises_the_run_id() -> None:
    assert run_manifest_key(RUN_ID) == f"manifest-{RUN_ID}.json"
    assert run_manifest_key("a/b c:d\x00é") == "manifest-a-b-c-d--.json"
    assert run_manifest_key("..") == "manifest---.json"


@pytest.mark.parametrize("key, sidecar", [
    ("manifest.json", True), ("_SUCCESS", True), ("manifest-run1.json", True), (".rivet_doctor_probe", True),
    ("_quarantine/r/x.parquet", True), ("orders.parquet", False), ("sub/manifest.json", False),
    (".orders.parquet.123.0.tmp", False), ("manifest-x.json.bak", False),
])
def test_is_sidecar_matches_the_reference_list(key: str, sidecar: bool) -> None:
    assert is_sidecar(key) is sidecar


# ---------------------------------------------------------------------------------------
# the write group and reading back
# ---------------------------------------------------------------------------------------
class RecordingDestination(Destination):
    """A real destination whose writes are recorded and can be made to fail at step N."""

    def __init__(self, inner: Destination, fail_at: int | None = None) -> None:
        self.inner, self.fail_at, self.writes = inner, fail_at, []
        self.kind, self.uri, self.supports_manifest = inner.kind, inner.uri, inner.supports_manifest

    def write_bytes(self, data: bytes, key: str) -> WriteResult:
        self.writes.append(key)
        if self.fail_at == len(self.writes):
            raise destination_error(f"injected failure writing {key}")
        return self.inner.write_bytes(data, key)

    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        return self.inner.write_file(local_path, key, staged)

    def head(self, key: str) -> ObjectInfo | None:
        return self.inner.head(key)

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        return self.inner.list(prefix)

    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        return self.inner.read_bytes(key, max_bytes)

    def move(self, src_key: str, dst_key: str) -> None:
        self.inner.move(src_key, dst_key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


@pytest.fixture
def local_dest(tmp_path: Path) -> Destination:
    return open_destination(DestinationSpec("local", path=str(tmp_path / "dest")))


def test_a_successful_run_writes_manifest_then_run_copy_then_success(tmp_path: Path, local_dest: Destination) -> None:
    rec = RecordingDestination(local_dest)
    m, data = publish_run(rec, tmp_path)
    assert rec.writes == [MANIFEST_KEY, run_manifest_key(RUN_ID), SUCCESS_KEY]
    assert local_dest.read_bytes(MANIFEST_KEY) == data == local_dest.read_bytes(run_manifest_key(RUN_ID))
    assert local_dest.read_bytes(SUCCESS_KEY) == success_marker_body(data)
    assert data == serialize_manifest(m)


@pytest.mark.parametrize("status", ["failed", "interrupted", "running"])
def test_a_non_success_run_writes_no_success_marker(tmp_path: Path, local_dest: Destination, status: str) -> None:
    rec = RecordingDestination(local_dest)
    publish_run(rec, tmp_path, status=status)
    assert rec.writes == [MANIFEST_KEY, run_manifest_key(RUN_ID)]
    assert local_dest.head(SUCCESS_KEY) is None


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_failed_write_raises_and_no_marker_exists_for_unwritten_bytes(
    tmp_path: Path, local_dest: Destination, fail_at: int
) -> None:
    rec = RecordingDestination(local_dest, fail_at=fail_at)
    with pytest.raises(DestinationError, match="injected"):
        publish_run(rec, tmp_path)
    assert len(rec.writes) == fail_at  # the sequence stopped at the failure
    assert local_dest.head(SUCCESS_KEY) is None


def test_read_manifest_returns_none_for_a_legacy_prefix_and_the_parsed_manifest_otherwise(
    tmp_path: Path, local_dest: Destination
) -> None:
    assert read_manifest(local_dest) is None
    m, data = publish_run(local_dest, tmp_path)
    assert read_manifest(local_dest) == (m, data)
    with pytest.raises(DestinationError, match="over the 100-byte limit"):
        read_manifest(local_dest, max_bytes=100)
    local_dest.write_bytes(b"{not json", MANIFEST_KEY)
    with pytest.raises(ManifestError):
        read_manifest(local_dest)


def test_a_failed_rerun_leaves_the_old_marker_which_verification_calls_stale(
    tmp_path: Path, local_dest: Destination
) -> None:
    m, _ = publish_run(local_dest, tmp_path)
    write_manifest_files(local_dest, replace(m, run_id="orders_rerun", status="failed"))
    v = verify_at_destination(local_dest)
    assert [f.kind for f in v.failures] == ["success_marker_stale"]


def test_quarantine_moves_aside_and_never_deletes(tmp_path: Path, local_dest: Destination,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    local_dest.write_bytes(b"divergent", "orders_9.parquet")
    assert quarantine_object(local_dest, "run/1", "orders_9.parquet") is True
    assert [o.key for o in local_dest.list()] == [f"{QUARANTINE_PREFIX}run-1/orders_9.parquet"]
    with caplog.at_level(logging.WARNING):
        assert quarantine_object(local_dest, "run/1", "orders_9.parquet") is False
    assert "could not quarantine" in caplog.text
    assert verify_at_destination(local_dest).legacy_run  # quarantine is not untracked


# ---------------------------------------------------------------------------------------
# verification, on local AND S3
# ---------------------------------------------------------------------------------------
@pytest.fixture(params=["local", "s3"])
def dest(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Destination]:
    if request.param == "local":
        yield open_destination(DestinationSpec("local", path=str(tmp_path / "dest")))
    else:
        s3 = request.getfixturevalue("s3")
        yield open_destination(DestinationSpec(
            "s3", bucket=s3.bucket, prefix=f"{s3.prefix}exports/orders/", endpoint=s3.endpoint,
            access_key=s3.access_key, secret_key=s3.secret_key,
        ))


def kinds(v: Verification) -> list[str]:
    return [f.kind for f in v.failures]


def test_a_clean_run_passes_with_every_part_verified(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path, n=3)
    v = verify_at_destination(dest)
    assert v.passed and v.manifest_found and not v.legacy_run and v.failures == []
    assert v.parts_verified == 3 and v.parts_failed == 0
    assert v.parts_md5_verified == (3 if dest.kind == "s3" else 0)  # local listings carry no MD5
    assert v.success_marker_consistent and v.manifest_self_consistent and v.exit_code() == 0
    assert v.to_dict() == {
        "manifest_found": True, "legacy_run": False, "parts_verified": 3,
        "parts_md5_verified": v.parts_md5_verified, "parts_failed": 0,
        "success_marker_consistent": True, "manifest_self_consistent": True, "passed": True,
        "failures": [], "depth_level": "sample",  # the API default: no part is downloaded
    }


def test_a_deleted_part_is_part_missing_with_exit_3(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path)
    dest.delete("orders_1.parquet")
    v = verify_at_destination(dest)
    assert kinds(v) == ["part_missing"] and not v.passed and v.exit_code() == 3
    assert v.failures[0].to_dict() == {"kind": "part_missing", "part_id": 2, "path": "orders_1.parquet",
                                       "code": "RIVET_VERIFY_PART_MISSING"}
    assert v.parts_failed == 1 and v.parts_verified == 2


def test_a_resized_part_is_part_size_mismatch(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path)
    dest.write_bytes(b"short", "orders_0.parquet")
    v = verify_at_destination(dest)
    assert kinds(v) == ["part_size_mismatch"] and v.exit_code() == 3
    f = v.failures[0]
    assert (f.part_id, f.path, f.expected, f.actual) == (1, "orders_0.parquet", 1000, 5)


def test_a_same_size_rewrite_is_a_checksum_mismatch_where_the_listing_has_md5(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path)
    dest.write_bytes(b"\x00" * 1000, "orders_0.parquet")
    v = verify_at_destination(dest)
    if dest.kind == "s3":
        assert kinds(v) == ["part_checksum_mismatch"] and v.exit_code() == 3
        assert v.failures[0].code == "RIVET_VERIFY_PART_CHECKSUM_MISMATCH"
    else:  # local listings are size-only by design (no download at verify time)
        assert v.passed and v.parts_md5_verified == 0


def test_a_rewritten_manifest_with_the_old_marker_is_success_marker_stale(tmp_path: Path, dest: Destination) -> None:
    m, data = publish_run(dest, tmp_path)
    new = serialize_manifest(replace(m, finished_at="2026-01-02T00:00:00Z"))
    dest.write_bytes(new, MANIFEST_KEY)
    v = verify_at_destination(dest)
    assert kinds(v) == ["success_marker_stale"] and v.exit_code() == 3 and not v.success_marker_consistent
    assert v.failures[0].marker_fingerprint == success_marker_body(data).decode().strip()
    assert v.failures[0].manifest_fingerprint == success_marker_body(new).decode().strip()


def test_an_extra_object_is_untracked_but_the_verdict_still_passes(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path)
    dest.write_bytes(b"stray", "stray.csv")
    dest.write_bytes(b"t", ".orders_5.parquet.999.0.tmp")  # a crash leftover is untracked too
    for sidecar in ["manifest-older_run.json", ".rivet_doctor_probe", "_quarantine/r/old.parquet"]:
        dest.write_bytes(b"{}", sidecar)
    v = verify_at_destination(dest)
    assert v.passed and v.exit_code() == 0 and not v.failed
    assert [(f.kind, f.key, f.size_bytes) for f in v.failures] == [
        ("untracked_object", ".orders_5.parquet.999.0.tmp", 1), ("untracked_object", "stray.csv", 5)]
    assert v.failures[1].to_dict()["code"] == "RIVET_VERIFY_UNTRACKED_OBJECT"


@pytest.mark.parametrize("body", [b"garbage\n", b"\xff\xfe\x00", b"XXH3:0123456789abcdef", b"x" * 5000])
def test_a_malformed_or_oversized_marker_is_success_marker_malformed(
    tmp_path: Path, dest: Destination, body: bytes
) -> None:
    publish_run(dest, tmp_path)
    dest.write_bytes(body, SUCCESS_KEY)
    v = verify_at_destination(dest)
    assert kinds(v) == ["success_marker_malformed"] and v.exit_code() == 3
    preview = v.failures[0].body_preview
    assert len(preview) <= 80 and "\x00" not in preview
    if len(body) > 4096:
        assert "over the 4096-byte cap" in preview


def test_a_marker_with_trailing_whitespace_is_consistent(tmp_path: Path, dest: Destination) -> None:
    _, data = publish_run(dest, tmp_path)
    dest.write_bytes(success_marker_body(data).rstrip() + b"  \r\n", SUCCESS_KEY)
    assert verify_at_destination(dest).success_marker_consistent


@pytest.mark.parametrize("mangle", [lambda d: d[: len(d) // 2], lambda d: b"{]", lambda d: b"\xff" + d,
                                    lambda d: d.replace(b'"row_count": 30', b'"row_count": "30"')])
def test_a_truncated_or_malformed_manifest_is_reported_without_crashing(
    tmp_path: Path, dest: Destination, mangle: Any
) -> None:
    _, data = publish_run(dest, tmp_path)
    dest.write_bytes(mangle(data), MANIFEST_KEY)
    v = verify_at_destination(dest)
    assert v.manifest_found and not v.passed and not v.manifest_self_consistent
    assert kinds(v) == ["manifest_self_inconsistent"] and "cannot parse" in v.failures[0].detail
    assert v.exit_code() == 3


def test_a_self_inconsistent_manifest_is_reported_and_parts_are_still_checked(tmp_path: Path, dest: Destination) -> None:
    m, _ = publish_run(dest, tmp_path)
    write_manifest_files(dest, replace(m, row_count=m.row_count + 1))
    dest.delete("orders_2.parquet")
    v = verify_at_destination(dest)
    assert kinds(v) == ["manifest_self_inconsistent", "part_missing"] and v.exit_code() == 3
    assert v.success_marker_consistent  # the marker matches the (inconsistent) manifest


def test_a_manifest_over_64_mib_is_oversized_data_integrity_not_a_download(
    tmp_path: Path, dest: Destination, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_run(dest, tmp_path)
    if dest.kind == "local":
        os.truncate(dest.root / MANIFEST_KEY, 64 * 1024 * 1024 + 1)  # sparse: costs no disk
    else:
        monkeypatch.setattr("rivet_core.manifest.verify.MAX_MANIFEST_BYTES", 1024)
    v = verify_at_destination(dest)
    # Rivet never writes a manifest that large: the prefix was verified wrong (exit 3), not unreadable.
    assert kinds(v) == ["manifest_oversized"] and "cap" in v.failures[0].describe()
    assert v.failures[0].size_bytes > v.failures[0].limit_bytes
    assert v.manifest_found and not v.passed and v.exit_code() == 3


def test_a_missing_success_marker_fails_with_exit_3(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path)
    dest.delete(SUCCESS_KEY)  # what a crash between manifest.json and _SUCCESS leaves
    v = verify_at_destination(dest)
    assert kinds(v) == ["success_marker_missing"] and v.failures[0].code == "RIVET_VERIFY_SUCCESS_MISSING"
    assert not v.passed and not v.success_marker_consistent and v.exit_code() == 3
    assert "run the export again" in v.failures[0].describe()


def test_a_manifest_of_another_export_fails_when_the_export_is_named(tmp_path: Path, dest: Destination) -> None:
    m, _ = publish_run(dest, tmp_path)
    assert verify_at_destination(dest, export_name=m.export_name).passed
    v = verify_at_destination(dest, export_name="customers")
    assert kinds(v) == ["manifest_export_mismatch"] and not v.passed and v.exit_code() == 3
    assert (v.failures[0].actual, v.failures[0].expected) == (m.export_name, "customers")
    assert "own destination prefix" in v.failures[0].describe()
    assert v.parts_verified == m.part_count  # the parts are still checked and reported


def test_no_manifest_is_a_legacy_verdict_that_neither_passes_nor_fails(tmp_path: Path, dest: Destination) -> None:
    dest.write_bytes(b"old part", "orders_old.parquet")
    v = verify_at_destination(dest)
    assert v.legacy_run and not v.manifest_found and not v.passed and v.failures == []
    assert v.exit_code() == 0


def test_light_depth_checks_presence_and_size_from_the_listing_only(tmp_path: Path, dest: Destination) -> None:
    publish_run(dest, tmp_path)
    dest.write_bytes(b"untracked", "stray.bin")
    v = verify_at_destination(dest, depth="light")  # no untracked-object scan at light
    assert v.passed and v.parts_verified == 3 and v.depth_level == "light" and v.failures == []
    dest.delete("orders_0.parquet")
    assert kinds(verify_at_destination(dest, depth="light")) == ["part_missing"]
    assert kinds(verify_at_destination(dest, depth="sample")) == ["part_missing", "untracked_object"]


class BrokenDestination(RecordingDestination):
    def __init__(self, inner: Destination, broken: set[str]) -> None:
        super().__init__(inner)
        self.broken = broken

    def head(self, key: str) -> ObjectInfo | None:
        if f"head:{key}" in self.broken:
            raise destination_error(f"connection reset reading {key}", transient=True)
        return super().head(key)

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        if "list" in self.broken:
            raise destination_error("connection reset listing", transient=True)
        return super().list(prefix)


@pytest.mark.parametrize("broken, kind", [({"head:manifest.json"}, "manifest_read_error"),
                                          ({"list"}, "list_prefix_error"),
                                          ({"head:_SUCCESS"}, "success_marker_read_error")])
def test_transient_io_errors_are_could_not_verify_with_exit_2(
    tmp_path: Path, local_dest: Destination, broken: set[str], kind: str
) -> None:
    publish_run(local_dest, tmp_path)
    v = verify_at_destination(BrokenDestination(local_dest, broken))
    # a connection reset: retrying may succeed (exit 2 of the one table, as for a run)
    assert kinds(v) == [kind] and not v.passed and v.exit_code() == 2
    assert v.failures[0].code.startswith("RIVET_VERIFY_") and v.failures[0].transient is True


def test_a_permanent_io_error_is_could_not_verify_with_exit_1(tmp_path: Path, local_dest: Destination) -> None:
    publish_run(local_dest, tmp_path)
    v = verify_at_destination(PermanentlyBroken(local_dest))  # listing refused: not worth retrying
    assert kinds(v) == ["list_prefix_error"] and v.failures[0].transient is False and v.exit_code() == 1


class PermanentlyBroken(BrokenDestination):
    def __init__(self, inner: Destination) -> None:
        super().__init__(inner, set())

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        raise destination_error("cannot list: Permission denied")


def test_verified_wrong_outranks_could_not_verify_in_the_exit_code(tmp_path: Path, local_dest: Destination) -> None:
    publish_run(local_dest, tmp_path)
    local_dest.write_bytes(b"junk", SUCCESS_KEY)
    v = verify_at_destination(BrokenDestination(local_dest, {"list"}))
    assert sorted(kinds(v)) == ["list_prefix_error", "success_marker_malformed"] and v.exit_code() == 3


def test_unknown_depth_is_rejected(local_dest: Destination) -> None:
    from rivet_core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown verification depth"):
        verify_at_destination(local_dest, depth="deep")


def test_verify_failure_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError):
        VerifyFailure("made_up")


def test_split_unit_siblings_of_the_same_family_are_verified_and_not_untracked(
    tmp_path: Path, local_dest: Destination
) -> None:
    staged = tmp_path / "s.parquet"
    staged.write_bytes(b"sibling-part")
    sib_part = part_from(local_dest.write_file(staged, "orders__u2_0.parquet"), 1)
    sibling = make_manifest([sib_part], run_id="orders__u2_r", export_name="orders__u2", export_family="orders")
    write_manifest_files(local_dest, sibling)
    staged.write_bytes(b"own-part!")
    own_part = part_from(local_dest.write_file(staged, "orders__u1_0.parquet"), 1)
    write_manifest_files(local_dest, make_manifest([own_part], run_id="orders__u1_r", export_name="orders__u1",
                                                   export_family="orders"))
    v = verify_at_destination(local_dest)
    assert v.passed and v.failures == [] and v.parts_verified == 2
    local_dest.delete("orders__u2_0.parquet")
    assert kinds(verify_at_destination(local_dest)) == ["part_missing"]


def test_a_manifest_written_before_the_neutral_orchestrator_key_still_loads() -> None:
    """tests/fixtures/manifest_before_orchestrator/manifest.json was serialized by the release
    that named the run id key after the integration; it parses, the id lands in
    `orchestrator_run_id` and the orchestrator's name comes from the old key."""
    data = (Path(__file__).parent / "fixtures" / "manifest_before_orchestrator" / "manifest.json").read_bytes()
    assert b'"orchestrator' not in data
    back = parse_manifest(data)
    assert (back.orchestrator, back.orchestrator_run_id) == ("Dagster", "6f1c2d3e-0000-4000-8000-00000000a11d")
    assert back.row_count == 5 and back.parts[0].path == "orders_20260101_120000_123.parquet"
    rewritten = json.loads(serialize_manifest(back))  # written again: the neutral keys ...
    assert rewritten["orchestrator_run_id"] == back.orchestrator_run_id and rewritten["orchestrator"] == "Dagster"
    # ... and, for one release, the old key with the same id (docs/manifest.md "Deprecated keys")
    def old_keys(obj: dict[str, Any]) -> list[str]:
        return [k for k in obj if k.endswith("_run_id") and k not in ("orchestrator_run_id", "run_id")]

    legacy = old_keys(rewritten)
    assert len(legacy) == 1 and legacy == old_keys(json.loads(data))
    assert rewritten[legacy[0]] == back.orchestrator_run_id
    assert parse_manifest(serialize_manifest(back)) == back  # the legacy key does not change what reads back
