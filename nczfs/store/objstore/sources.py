"""The SOURCE forms of the object stores: which URLs are S3's, Azure's, a web server's, and their
locations (the scheme registry dispatches to these: nczfs/store/registry.py)."""

from __future__ import annotations

from nczfs.toolbox.errors import SourceError
from nczfs.store.opening import Given, Located
from nczfs.store.objstore.cloudurl import azure_https_location, parse_cloud_url
from nczfs.store.objstore.s3url import parse_s3_url


def claims_s3(given: Given) -> bool:
    """Is the URL an S3 source? As netCDF-C decides (NCZARR_FORMATS.md section 6): s3:// and
    gs3:// are; an http(s) URL is if its mode says s3 or gs3, or its host is AWS's or Google's S3
    endpoint; otherwise it names a Zarr on a web server."""
    if given.scheme not in ("http", "https"):
        return True
    host = (given.parts.hostname or "").lower() if given.parts else ""
    return bool(given.modes & {"s3", "gs3"}) or host.endswith(".amazonaws.com") or host == "storage.googleapis.com"


def locate_s3(given: Given) -> Located:
    if given.chosen not in (None, "s3"):
        raise SourceError(f"{given.text}: mode {given.words} contradicts the URL: {given.scheme}:// URLs are S3 "
                          f"sources")
    loc = parse_s3_url(given.text)
    return Located(f"{loc.bucket}/{loc.prefix}".rstrip("/"), loc)


def claims_azure(given: Given) -> bool:
    """az://, abfs[s]://, adl:// URLs, and https:// ones of Azure's blob host."""
    return given.scheme != "https" or azure_https_location(given.text) is not None


def locate_cloud(given: Given) -> Located:
    """gs://, az://, abfs[s]://, adl:// and Azure's https:// URLs: ``bucket/prefix`` (``container/prefix``);
        a mode word choosing another backend is refused (as source.py refuses it for any backend)."""
    if given.scheme == "https":
        if given.chosen is not None:
            raise _web_misfit(given)
        location = azure_https_location(given.text)
        assert location is not None  # claims_azure
        return Located(location)
    return Located(parse_cloud_url(given.text).location)


def locate_web(given: Given) -> Located:
    """A Zarr on a web server: its URL without the fragment."""
    if given.chosen is not None:
        raise _web_misfit(given)
    return Located(given.text.split("#", 1)[0].rstrip("/"))


def _web_misfit(given: Given) -> SourceError:
    return SourceError(f"{given.text}: mode {given.chosen} does not fit a web server's URL (S3 endpoints need "
                       f"mode=s3)")
