"""The object stores' registry entries: S3 (``s3://``, ``gs3://``, an http(s) URL netCDF-C calls
S3), Google Cloud Storage (``gs://``), Azure (``az://``, ``abfs[s]://``, its https hosts) and a
Zarr on a web server (any other http(s) URL), in that order (an https URL is S3's or Azure's if
it claims it, else the web server's). Each one's client is imported when a mount opens it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from nczfs.store.registry import Backend, register
from nczfs.store.objstore.options import CloudOptions, S3Options, s3_identity
from nczfs.store.objstore.sources import claims_azure, claims_s3, locate_cloud, locate_s3, locate_web
from nczfs.store.objstore.transport import Bounds

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore
    from nczfs.store.opening import Opening


def _s3(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.store import open_s3

    assert opening.source.parsed is not None  # parse_source parsed the URL
    return open_s3(S3Options.of(opening), opening.source.parsed)


def _gcs(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.cloud import open_gcs

    return open_gcs(CloudOptions.of(opening))


def _azure(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.cloud import open_azure

    return open_azure(CloudOptions.of(opening))


def _cloud_identity(opening: Opening) -> tuple[str | None, str | None, str | None]:
    values = opening.options
    endpoint = (values.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")
                or os.environ.get("AZURE_STORAGE_ENDPOINT"))
    return endpoint, values.get("azure_storage_account"), values.get("profile")


def _http(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.webzarr import open_http

    return open_http(opening.source.text, opening.source.location, Bounds(**Bounds.given(opening.options)))


S3 = register(Backend("s3", _s3, schemes=("s3", "gs3", "http", "https"), modes=("s3", "gs3"), claims=claims_s3,
                      locate=locate_s3, rows=S3Options.rows, identity=s3_identity,
                      forms="s3://BUCKET/PREFIX (or any S3 URL netCDF-C takes)"))
GCS = register(Backend("gcs", _gcs, schemes=("gs",), locate=locate_cloud, rows=CloudOptions.rows,
                       identity=_cloud_identity, forms="gs://BUCKET/PREFIX"))
AZURE = register(Backend("azure", _azure, schemes=("az", "abfs", "abfss", "adl", "https"), claims=claims_azure,
                         locate=locate_cloud, rows=CloudOptions.rows, identity=_cloud_identity,
                         forms="az://CONTAINER/PREFIX, abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX"))
HTTP = register(Backend("http", _http, schemes=("http", "https"), locate=locate_web, rows=Bounds.rows,
                        forms="https://HOST/PATH/X.zarr (a web server's Zarr, read-only)"))
