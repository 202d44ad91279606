"""The credentials of the clouds' own SDKs (:mod:`.cloudsdk`), taken from where obstore's client
takes its own: the mount's options, then the environment, in obstore's order."""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from nczfs.toolbox.errors import NczfsError

#: the scope obstore's GCS tokens carry
GCS_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)


def gcs_credentials(credentials_file: str | None) -> Any:
    """The credentials obstore's GCS client takes, in its order: ``-o google_application_credentials=``,
    ``GOOGLE_SERVICE_ACCOUNT_KEY`` (the key's JSON), ``GOOGLE_SERVICE_ACCOUNT_PATH`` (or
    ``GOOGLE_SERVICE_ACCOUNT``), then Google's default chain (``GOOGLE_APPLICATION_CREDENTIALS``,
    gcloud's application-default credentials, the metadata server). A service account's tokens
    are signed by the key itself (self-signed JWTs, as obstore makes them: no token server asked)."""
    import google.auth
    from google.oauth2 import service_account

    path = (credentials_file or os.environ.get("GOOGLE_SERVICE_ACCOUNT_PATH")
            or os.environ.get("GOOGLE_SERVICE_ACCOUNT"))
    if credentials_file is None and (key := os.environ.get("GOOGLE_SERVICE_ACCOUNT_KEY")):
        credentials: Any = service_account.Credentials.from_service_account_info(json.loads(key), scopes=GCS_SCOPES)
    elif path:
        credentials = _credentials_file(path)
    else:
        credentials, _ = google.auth.default(scopes=GCS_SCOPES)
    if isinstance(credentials, service_account.Credentials):
        credentials = credentials.with_always_use_jwt_access(True)
    return credentials


def _credentials_file(path: str) -> Any:
    """A service account's key file, or gcloud's application-default credentials (a user's)."""
    from google.oauth2 import credentials as user, service_account

    with open(path, encoding="utf-8") as f:
        kind = json.load(f).get("type")
    if kind == "service_account":
        return service_account.Credentials.from_service_account_file(path, scopes=GCS_SCOPES)
    if kind == "authorized_user":
        return user.Credentials.from_authorized_user_file(path, scopes=GCS_SCOPES)
    raise NczfsError(f"{path}: credentials of type {kind!r}: conditional deletes take a service account's or a user's")


def azure_credential(account: str | None, key: str | None, sas: str | None) -> Callable[[], Any]:
    """The Azure SDK's credential of what obstore's client is made from, in obstore's order: a
    bearer token (``AZURE_STORAGE_TOKEN``), an account key (the options', or obstore's variables
    ``AZURE_STORAGE_ACCOUNT_KEY``/``_ACCESS_KEY``/``_MASTER_KEY``), a service principal or
    workload identity (``AZURE_CLIENT_ID`` with ``AZURE_CLIENT_SECRET`` or
    ``AZURE_FEDERATED_TOKEN_FILE``: azure-identity's), a SAS (the connection string's,
    ``AZURE_STORAGE_SAS_KEY``/``_TOKEN``), then azure-identity's default chain (the Azure CLI, a
    managed identity); made when the client is."""
    env = os.environ.get
    key = key or env("AZURE_STORAGE_ACCOUNT_KEY") or env("AZURE_STORAGE_ACCESS_KEY") or env("AZURE_STORAGE_MASTER_KEY")
    sas = sas or env("AZURE_STORAGE_SAS_KEY") or env("AZURE_STORAGE_SAS_TOKEN")

    def made() -> Any:
        if token := env("AZURE_STORAGE_TOKEN"):
            return _Bearer(token)
        if key:
            return {"account_name": account, "account_key": key}
        principal = env("AZURE_CLIENT_ID") and (env("AZURE_CLIENT_SECRET") or env("AZURE_FEDERATED_TOKEN_FILE"))
        if sas and not principal:
            from azure.core.credentials import AzureSasCredential

            return AzureSasCredential(sas.lstrip("?"))
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError:
            raise NczfsError("no account key or SAS given, and azure-identity (for a service principal, the "
                             "Azure CLI or a managed identity) is not installed") from None
        return DefaultAzureCredential(exclude_interactive_browser_credential=True)

    return made


class _Bearer:
    """A bearer token given as it is (``AZURE_STORAGE_TOKEN``), as azure-core asks a credential for one."""

    def __init__(self, token: str):
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self.token, 2**31 - 1)
