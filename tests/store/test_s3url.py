"""netCDF-C's S3 URL forms (NCZARR_FORMATS.md section 6) reduced to bucket, prefix, endpoint, region."""

import pytest

from nczfs.toolbox.errors import SourceError
from nczfs.store.objstore.s3url import GOOGLE_ENDPOINT, S3Location, parse_s3_url
from nczfs.config.source import parse_source


@pytest.mark.parametrize(
    "url, want",
    [
        ("s3://bucket/some/prefix", S3Location("bucket", "some/prefix")),
        ("s3://bucket", S3Location("bucket", "")),
        ("s3://bucket/p/#mode=nczarr,s3", S3Location("bucket", "p")),
        ("https://s3.eu-west-1.amazonaws.com/bucket/a/b", S3Location("bucket", "a/b", None, "eu-west-1")),
        ("https://s3.amazonaws.com/bucket/a", S3Location("bucket", "a", None, "us-east-1")),
        ("https://bucket.s3.us-west-2.amazonaws.com/a/b#mode=zarr,s3", S3Location("bucket", "a/b", None, "us-west-2")),
        ("https://bucket.s3.amazonaws.com/a", S3Location("bucket", "a", None, "us-east-1")),
        ("https://storage.googleapis.com/bucket/x", S3Location("bucket", "x", GOOGLE_ENDPOINT)),
        ("gs3://bucket/x", S3Location("bucket", "x", GOOGLE_ENDPOINT)),
        ("http://127.0.0.1:8333/bucket/ds.zarr", S3Location("bucket", "ds.zarr", "http://127.0.0.1:8333")),
        ("https://minio.example.org/bucket/a%20b", S3Location("bucket", "a b", "https://minio.example.org")),
        ("https://bucket.s3.fr-par.scw.cloud/ds", S3Location("bucket", "ds", "https://s3.fr-par.scw.cloud", "fr-par")),
        ("[mode=nczarr,s3]https://s3.us-east-2.amazonaws.com/bucket/p", S3Location("bucket", "p", None, "us-east-2")),
    ],
)
def test_url_forms(url, want):
    assert parse_s3_url(url) == want


@pytest.mark.parametrize(
    "url, reason",
    [
        ("s3://", "no bucket"),
        ("https://127.0.0.1:9000/", "no bucket"),
        ("s3://Bad_Bucket/x", "not a valid S3 bucket name"),
        ("s3://bucket/a/../b", "'..'"),
        ("[mode=s3 s3://bucket/x", "unclosed '\\['"),
    ],
)
def test_bad_urls_name_the_reason(url, reason):
    with pytest.raises(SourceError, match=reason):
        parse_s3_url(url)


def test_source_location_is_bucket_and_prefix():
    s = parse_source("https://bucket.s3.us-west-2.amazonaws.com/a/b#mode=nczarr,s3&aws.profile=p")
    assert (s.backend, s.location, s.params["aws.profile"]) == ("s3", "bucket/a/b", "p")
    assert parse_source("s3://bucket").location == "bucket"
    with pytest.raises(SourceError, match="bucket"):
        parse_source("s3://no_such_BUCKET/x")
