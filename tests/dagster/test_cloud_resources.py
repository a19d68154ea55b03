"""GCS and Azure destinations in Dagster take their client from the project's resources
(issue 17 item 3), against the real emulators (scripts/services.sh: fake-gcs-server,
Azurite).

dagster-gcp and dagster-azure cannot be installed in this project's lock (dagster-gcp needs
pandas<3 through dagster-pandas; dagster-azure's opentelemetry/psutil pins conflict), so the
resources below are small `dg.ConfigurableResource`s with the SAME interface as theirs
(rivet_dagster/store_clients.py cites it):
- `GCSResource.get_client()` → `google.cloud.storage.Client`, attached to the op context as
  that client (`IAttachDifferentObjectToOpContext`, as dagster_gcp.GCSResource does);
- `AzureBlobStorageResource.get_client()` → a context manager yielding a
  `BlobServiceClient`; `ADLS2Resource.blob_client` → a `BlobServiceClient`.

The exports' rivet.yaml carries NO credentials and no emulator endpoint, so the only way to
reach the emulator is the resource's client. The parts are re-read with pyarrow and compared
with the SQLite source. A resource without the interface fails the step once (no retry),
naming the key, the export and what is expected; a key for another store than the
destination's is refused when the definitions load.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rivet_core import api
from rivet_dagster import build_definitions
from tests.cloud_areas import AzureArea, GCSArea, success_table
from tests.dagster.support import check_evaluations, run_job
from tests.helpers import write_config

ROWS = 250


class GCSResource(dg.ConfigurableResource, dg.IAttachDifferentObjectToOpContext):
    """dagster_gcp.GCSResource's interface, pointed at the emulator."""

    endpoint: str

    def get_client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.endpoint})

    def get_object_to_set_on_execution_context(self) -> Any:
        return self.get_client()


def _blob_service(account_url: str, account: str, key: str) -> Any:
    from azure.storage.blob import BlobServiceClient

    return BlobServiceClient(account_url, credential={"account_name": account, "account_key": key})


class AzureBlobStorageResource(dg.ConfigurableResource):
    """dagster_azure.blob.AzureBlobStorageResource's interface, pointed at Azurite."""

    account_url: str
    account: str
    key: str

    @contextmanager
    def get_client(self) -> Iterator[Any]:
        service = _blob_service(self.account_url, self.account, self.key)
        try:
            yield service
        finally:
            service.close()


class ADLS2Resource(dg.ConfigurableResource):
    """dagster_azure.adls2.ADLS2Resource's blob side (`blob_client`), pointed at Azurite."""

    account_url: str
    account: str
    key: str

    @property
    def blob_client(self) -> Any:
        return _blob_service(self.account_url, self.account, self.key)


class NoClientResource(dg.ConfigurableResource):
    """A resource offering no object-store client at all."""

    name: str = "nothing"


def _source(tmp: Path) -> str:
    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)",
                         [(i, f"item {i}", None if i % 7 == 0 else i * 3) for i in range(ROWS)])
    return f"sqlite:///{db}"


def _source_rows(url: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        return conn.execute("SELECT id, name, qty FROM items ORDER BY id").fetchall()


def _rows(table: Any) -> list[tuple[Any, ...]]:
    table = table.sort_by("id")
    return list(zip(*(table.column(c).to_pylist() for c in ("id", "name", "qty")), strict=True))


def _export(name: str, destination: dict[str, Any], **dagster: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "table": "items", "mode": "full", "format": "parquet",
                             "destination": destination}
    if dagster:
        block["dagster"] = dagster
    return block


def _gcs_destination(area: GCSArea) -> dict[str, Any]:
    """No credentials_file, no endpoint: built from these fields, the client would look for
    Google application default credentials at storage.googleapis.com."""
    return {"type": "gcs", "bucket": area.bucket, "prefix": area.prefix}


def _azure_destination(area: AzureArea, prefix: str) -> dict[str, Any]:
    """No account_key_env / sas_token_env, no endpoint: built from these fields, the client
    would try DefaultAzureCredential at <account>.blob.core.windows.net."""
    return {"type": "azure", "account_name": area.account, "bucket": area.bucket, "prefix": prefix}


def test_a_gcs_export_takes_its_client_from_the_gcs_resource(
        gcs: GCSArea, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    url = _source(tmp_path)
    config = write_config(tmp_path, {"type": "sqlite", "url": url}, [
        _export("items_gcs", _gcs_destination(gcs), gcs_resource_key="gcs")])
    defs = dg.Definitions.merge(build_definitions(config),
                                dg.Definitions(resources={"gcs": GCSResource(endpoint=gcs.endpoint)}))
    result = run_job(defs, "items_gcs_job", instance)
    assert result.success, "the export did not reach the emulator through the GCS resource"
    assert check_evaluations(result)["manifest_verified"].passed  # the check reads with it too
    assert _rows(success_table(gcs)) == _source_rows(url)


def test_azure_exports_take_their_client_from_the_blob_or_adls2_resource(
        azure: AzureArea, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    url = _source(tmp_path)
    config = write_config(tmp_path, {"type": "sqlite", "url": url}, [
        # no key of its own: takes the one given to build_definitions
        _export("items_blob", _azure_destination(azure, "blob/")),
        # its own key wins over build_definitions'
        _export("items_adls2", _azure_destination(azure, "adls2/"), azure_resource_key="adls2")])
    creds = {"account_url": azure.endpoint, "account": azure.account, "key": azure.key}
    defs = dg.Definitions.merge(
        build_definitions(config, azure_resource_key="blob"),
        dg.Definitions(resources={"blob": AzureBlobStorageResource(**creds), "adls2": ADLS2Resource(**creds)}))
    for name, prefix in (("items_blob", "blob/"), ("items_adls2", "adls2/")):
        result = run_job(defs, f"{name}_job", instance)
        assert result.success, f"{name} did not reach Azurite through its resource"
        assert check_evaluations(result)["manifest_verified"].passed
        assert _rows(success_table(azure, prefix)) == _source_rows(url)


def test_a_resource_without_the_client_interface_is_a_clear_error(
        azure: AzureArea, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    config = write_config(tmp_path, {"type": "sqlite", "url": _source(tmp_path)}, [
        _export("items_az", _azure_destination(azure, "wrong/"), azure_resource_key="store")])
    defs = dg.Definitions.merge(build_definitions(config),
                                dg.Definitions(resources={"store": NoClientResource()}))
    result = run_job(defs, "items_az_job", instance)
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures, "the run did not fail a step"
    assert len(failures) == 1, "a wiring error was retried"
    message = failures[0].step_failure_data.user_failure_data.description
    for part in ("items_az", "'store'", "dagster.azure_resource_key", "NoClientResource",
                 "BlobServiceClient"):
        assert part in message, (part, message)
    assert azure.keys("wrong/") == {}, "something was written without a client"


def test_a_resource_key_for_another_store_is_refused_at_load(tmp_path: Path) -> None:
    url = _source(tmp_path)
    gcs_export = _export("items_gcs", {"type": "gcs", "bucket": "items-bucket", "prefix": "p/"},
                         azure_resource_key="blob")
    local_export = _export("items_local", {"type": "local", "path": "out"}, gcs_resource_key="gcs")
    for block, expected in ((gcs_export, "items_gcs': dagster.azure_resource_key is set but the "
                                         "destination is type: gcs — use dagster.gcs_resource_key"),
                            (local_export, "items_local': dagster.gcs_resource_key is set but the "
                                           "destination is type: local, which takes no client")):
        config = write_config(tmp_path, {"type": "sqlite", "url": url}, [block])
        with pytest.raises(api.ConfigError) as raised:
            build_definitions(config)
        assert expected in str(raised.value)
