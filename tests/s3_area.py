"""One S3 bucket per test module, one fresh prefix per test (shared by S3-heavy modules).

SeaweedFS allocates volumes per bucket and stops accepting writes after ~75 buckets, so
modules with many S3 tests share one bucket (removed at the end of the module) and give
each test its own prefix. Import `s3_module_bucket` and define `s3` as `fresh_prefix(s3_module_bucket)`: it then
overrides conftest's per-test-bucket fixture, with the same attributes plus `prefix`.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest


# One bucket per test module, one unique prefix per test, removed at the end. The shared
# `s3` fixture in conftest.py creates a bucket per test and never deletes it; SeaweedFS
# allocates volumes per bucket and stops accepting writes (InternalError "no free volumes")
# after ~75 of them, which breaks the server for every suite. This override keeps the
# same attributes (endpoint, keys, bucket, client()) and adds `prefix`.
@dataclass(frozen=True)
class S3Area:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    prefix: str = ""

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1")


def _drop_bucket(area: S3Area) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    client = area.client()
    with contextlib.suppress(ClientError, BotoCoreError):
        for up in client.list_multipart_uploads(Bucket=area.bucket).get("Uploads", []):
            client.abort_multipart_upload(Bucket=area.bucket, Key=up["Key"], UploadId=up["UploadId"])
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=area.bucket):
            objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if objects:
                client.delete_objects(Bucket=area.bucket, Delete={"Objects": objects, "Quiet": True})
        client.delete_bucket(Bucket=area.bucket)


@pytest.fixture(scope="module")
def s3_module_bucket() -> Iterator[S3Area]:
    endpoint = os.environ.get("TEST_S3_ENDPOINT")
    if not endpoint:
        pytest.fail("An S3-compatible server is required but TEST_S3_ENDPOINT is not set. Run the "
                    "suite with `make test` (it starts the servers), or export TEST_S3_ENDPOINT.",
                    pytrace=False)
    area = S3Area(endpoint, os.environ.get("TEST_S3_ACCESS_KEY", ""),
                  os.environ.get("TEST_S3_SECRET_KEY", ""), f"rivet-t-{uuid.uuid4().hex[:12]}")
    try:
        area.client().create_bucket(Bucket=area.bucket)
    except Exception as exc:  # noqa: BLE001 - any failure here means the server is unusable
        pytest.fail(f"cannot use the S3 server at TEST_S3_ENDPOINT={endpoint}: {exc}", pytrace=False)
    yield area
    _drop_bucket(area)


def fresh_prefix(area: S3Area) -> S3Area:
    """The module's bucket with a prefix of its own for one test."""
    return replace(area, prefix=f"t-{uuid.uuid4().hex[:10]}/")
