"""Fixtures of the mount tests: a GCS bucket and an Azure container reached as users reach them
(``cloud``: each in turn), on the session's fake-gcs-server and Azurite."""

from __future__ import annotations

import pytest

from tests.helpers import CloudBackend


@pytest.fixture
def gcs(gcs_server, tmp_path_factory) -> CloudBackend:
    """A bucket, reached with a service-account key file."""
    from tests.gcsserver import service_account_file

    key = service_account_file(tmp_path_factory.mktemp("gcs-key") / "sa.json")
    return CloudBackend(gcs_server, gcs_server.new_bucket("m"), "gs",
                        ["-o", f"endpoint_url={gcs_server.endpoint},google_application_credentials={key}"])


@pytest.fixture
def azure(azurite, monkeypatch) -> CloudBackend:
    """A container, reached with the account named by an option and its key in the environment."""
    from tests.azurite import ACCOUNT, KEY

    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", KEY)  # as users give it; the mount inherits it
    return CloudBackend(azurite, azurite.new_container("m"), "az",
                        ["-o", f"endpoint_url={azurite.endpoint},azure_storage_account={ACCOUNT}"])


@pytest.fixture(params=["gcs", "azure"])
def cloud(request):
    return request.getfixturevalue(request.param)
