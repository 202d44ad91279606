"""The S3 backend against a real S3 server (SeaweedFS): the conformance suite, then S3-only behaviour."""

from __future__ import annotations

import pytest

from nczfs.store.s3 import S3Store
from nczfs.threads import ThreadedStore
from tests.store.conformance import StoreConformance

PREFIX = "ds/root"


class TestS3Store(StoreConformance):
    @pytest.fixture
    def sync_store(self, s3_server) -> S3Store:
        self.server = s3_server
        self.bucket = s3_server.new_bucket("conf")
        # a small multipart threshold so the 5 MiB conformance object goes through multipart upload
        return S3Store(s3_server.client(), self.bucket, PREFIX, multipart_threshold=5 * 1024 * 1024)

    def read_only_store(self) -> S3Store:
        return S3Store(self.server.client(), self.bucket, PREFIX, read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        self.server.client().put_object(Bucket=self.bucket, Key=f"{PREFIX}/{key}", Body=data)

    def get_raw(self, key: str) -> bytes | None:
        try:
            return self.server.client().get_object(Bucket=self.bucket, Key=f"{PREFIX}/{key}")["Body"].read()
        except self.server.client().exceptions.NoSuchKey:
            return None
