"""GCS and Azure test areas on the real emulators: one bucket/container per test, one API.

scripts/services.sh starts fake-gcs-server (TEST_GCS_ENDPOINT) and Azurite
(TEST_AZURE_ENDPOINT with TEST_AZURE_ACCOUNT / TEST_AZURE_KEY). `GCSArea` and `AzureArea`
give the tests one vocabulary for both clouds — the `destination:` block of a config, and
an independent oracle (list, read, write, delete objects with the cloud's own SDK, never
through rivet's destination code). `success_ids` re-reads with pyarrow every part that a
`status: success` manifest at the prefix lists.

A test whose emulator is unreachable FAILS naming the variable; it never skips.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

#: The env var the Azure configs of the tests name in account_key_env.
AZURE_KEY_ENV = "RIVET_TEST_AZ_KEY"


def require_env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{what} is required but {name} is not set. Run the suite with `make test` "
                    f"(it starts the emulators), or export {name} to point at a running one.",
                    pytrace=False)
    return value


@dataclass
class GCSArea:
    """A bucket on the GCS emulator; `prefix` is where a test's export writes."""

    endpoint: str
    bucket: str
    prefix: str = "exports/items/"
    kind: str = "gcs"
    _client: Any = field(default=None, repr=False)

    def client(self) -> Any:
        if self._client is None:
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import storage

            self._client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                          client_options={"api_endpoint": self.endpoint})
        return self._client

    def destination(self, prefix: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"type": "gcs", "bucket": self.bucket, "prefix": self.prefix if prefix is None else prefix,
                "endpoint": self.endpoint, **extra}

    def spec_fields(self) -> dict[str, Any]:
        return {"kind": "gcs", "bucket": self.bucket, "endpoint": self.endpoint}

    def delta_options(self) -> dict[str, str]:
        """deltalake storage options that read a table on this emulator straight from `gs://`
        (object_store's XML API reads; the emulator must answer on its address as its
        public host: scripts/services.sh starts it with `-public-host`). object_store takes a
        custom endpoint only from a service-account key's `gcs_base_url`; `disable_oauth`:
        the emulator needs no token."""
        key = {"gcs_base_url": self.endpoint.rstrip("/"), "disable_oauth": True, "client_email": "",
               "private_key": "", "private_key_id": ""}
        return {"google_service_account_key": json.dumps(key)}

    def create(self) -> None:
        self.client().create_bucket(self.bucket)

    def keys(self, prefix: str | None = None) -> dict[str, int]:
        """Every object under `prefix` (default: the area's), key relative to it → size."""
        prefix = self.prefix if prefix is None else prefix
        return {b.name[len(prefix):]: int(b.size) for b in self.client().list_blobs(self.bucket, prefix=prefix)}

    def read(self, key: str) -> bytes:
        return bytes(self.client().bucket(self.bucket).blob(key).download_as_bytes())

    def put(self, key: str, data: bytes) -> None:
        self.client().bucket(self.bucket).blob(key).upload_from_string(data)

    def remove(self, key: str) -> None:
        self.client().bucket(self.bucket).blob(key).delete()

    def drop(self) -> None:
        bucket = self.client().bucket(self.bucket)
        for blob in list(self.client().list_blobs(self.bucket)):
            blob.delete()
        bucket.delete()


@dataclass
class AzureArea:
    """A container on Azurite; `prefix` is where a test's export writes."""

    endpoint: str
    account: str
    key: str
    bucket: str  # the container, under Rivet's field name
    prefix: str = "exports/items/"
    kind: str = "azure"
    _client: Any = field(default=None, repr=False)

    def client(self) -> Any:
        """The ContainerClient of the area's container."""
        if self._client is None:
            from azure.storage.blob import BlobServiceClient

            service = BlobServiceClient(self.endpoint, credential={"account_name": self.account,
                                                                   "account_key": self.key})
            self._client = service.get_container_client(self.bucket)
        return self._client

    def destination(self, prefix: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"type": "azure", "account_name": self.account, "bucket": self.bucket,
                "prefix": self.prefix if prefix is None else prefix, "endpoint": self.endpoint,
                "account_key_env": AZURE_KEY_ENV, **extra}

    def spec_fields(self) -> dict[str, Any]:
        return {"kind": "azure", "bucket": self.bucket, "endpoint": self.endpoint,
                "account_name": self.account, "account_key": self.key}

    def create(self) -> None:
        self.client().create_container()

    def keys(self, prefix: str | None = None) -> dict[str, int]:
        prefix = self.prefix if prefix is None else prefix
        return {b.name[len(prefix):]: int(b.size) for b in self.client().list_blobs(name_starts_with=prefix)}

    def read(self, key: str) -> bytes:
        return bytes(self.client().get_blob_client(key).download_blob().readall())

    def put(self, key: str, data: bytes) -> None:
        self.client().get_blob_client(key).upload_blob(data, overwrite=True)

    def remove(self, key: str) -> None:
        self.client().get_blob_client(key).delete_blob()

    def drop(self) -> None:
        self.client().delete_container()


CloudArea = GCSArea | AzureArea


def gcs_area() -> GCSArea:
    endpoint = require_env("TEST_GCS_ENDPOINT", "A GCS emulator")
    return GCSArea(endpoint=endpoint, bucket=f"rivet-t-{uuid.uuid4().hex[:12]}")


def azure_area() -> AzureArea:
    endpoint = require_env("TEST_AZURE_ENDPOINT", "An Azure Blob Storage emulator (Azurite)")
    account = require_env("TEST_AZURE_ACCOUNT", "The Azurite account name")
    key = require_env("TEST_AZURE_KEY", "The Azurite account key")
    return AzureArea(endpoint=endpoint, account=account, key=key, bucket=f"rivet-t-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def gcs() -> Iterator[GCSArea]:
    """A fresh bucket on the GCS emulator for this test; removed afterwards."""
    area = gcs_area()
    try:
        area.create()
    except Exception as exc:  # noqa: BLE001 - any failure here means the emulator is unusable
        pytest.fail(f"cannot use the GCS emulator at TEST_GCS_ENDPOINT={area.endpoint}: {exc}", pytrace=False)
    yield area
    area.drop()


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> Iterator[AzureArea]:
    """A fresh container on Azurite for this test (removed afterwards); the account key is
    exported as RIVET_TEST_AZ_KEY so configs name it with account_key_env."""
    area = azure_area()
    try:
        area.create()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"cannot use Azurite at TEST_AZURE_ENDPOINT={area.endpoint}: {exc}", pytrace=False)
    monkeypatch.setenv(AZURE_KEY_ENV, area.key)
    yield area
    area.drop()


@pytest.fixture(params=["gcs", "azure"])
def cloud(request: pytest.FixtureRequest) -> CloudArea:
    """Each test that takes `cloud` runs once on the GCS emulator and once on Azurite."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def success_ids(area: CloudArea, column: str = "id", prefix: str | None = None) -> list[Any]:
    """Ids of every row in every part a `status: success` manifest at the prefix lists
    (manifest.json and each manifest-<run>.json, each run once) — re-read with pyarrow."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    prefix = area.prefix if prefix is None else prefix
    manifests: dict[str, dict[str, Any]] = {}
    for key in area.keys(prefix):
        if key.startswith("manifest") and key.endswith(".json") and "/" not in key:
            m = json.loads(area.read(prefix + key))
            if m.get("status") == "success":
                manifests[m["run_id"]] = m
    tables = []
    for m in manifests.values():
        for part in m["parts"]:
            if part.get("status", "committed") != "committed":
                continue
            data = area.read(prefix + part["path"])
            tables.append(pacsv.read_csv(pa.BufferReader(data)) if part["path"].endswith(".csv")
                          else pq.read_table(pa.BufferReader(data)))
    ids: list[Any] = []
    for table in tables:
        ids.extend(table.column(column).to_pylist())
    return sorted(ids)


def success_table(area: CloudArea, prefix: str | None = None) -> Any:
    """Every row of the parts the current manifest.json lists, as one pyarrow table."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    prefix = area.prefix if prefix is None else prefix
    m = json.loads(area.read(prefix + "manifest.json"))
    assert m["status"] == "success", m
    tables = []
    for part in m["parts"]:
        data = area.read(prefix + part["path"])
        tables.append(pacsv.read_csv(pa.BufferReader(data)) if part["path"].endswith(".csv")
                      else pq.read_table(pa.BufferReader(data)))
    return pa.concat_tables(tables, promote_options="permissive")
