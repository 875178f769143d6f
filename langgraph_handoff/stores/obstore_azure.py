"""``AzureBlobStore``: Azure Blob Storage, natively, on ``obstore`` (``az://container/prefix``).

Azure Blob enforces both conditions the saver relies on: ``If-None-Match: *`` (a lost
create-only PUT is **409 BlobAlreadyExists**, not 412) and ``If-Match: <etag>`` (412 when the blob
changed *or is missing*). Both map to :class:`~langgraph_handoff.errors.PreconditionFailedError`.
The ETag is the compare-and-swap token; it changes on every write, even of the same bytes.

The two clients, the error classification, async through the store's thread pool (and why) and
listing are shared with the S3 transport in :mod:`~langgraph_handoff.stores.obstore_base`. What is
Azure's:

* **Batch delete.** obstore's batch delete stops at the first missing key and drops the rest (on
  Azurite it left up to 689 of 1200 keys). :meth:`AzureBlobStore.delete_many` sends batches of at
  most 256 keys (one Blob Batch request each) and deletes the keys of a failed batch one by one.
* **Listing.** Azurite ignores ``startFrom``; the page collector filters ``start_after`` itself.
* **A missing container** is a :class:`~langgraph_handoff.errors.StoreError` saying so, never an
  empty store.
* **Creating the container** (``create_container=True``) is one signed REST call (obstore has no
  API for it); it needs an account key or a SAS token.

**Credentials**, first found wins:

1. ``account_key=`` (Shared Key), ``sas_token=`` (a SAS, with or without the leading ``?``), or
   ``bearer_token=`` (an Entra ID access token you renew yourself);
2. a connection string: ``connection_string=`` or ``AZURE_STORAGE_CONNECTION_STRING``
   (``AccountName``/``AccountKey``/``SharedAccessSignature``/``BlobEndpoint``/``EndpointSuffix``,
   or ``UseDevelopmentStorage=true`` for Azurite on 127.0.0.1:10000);
3. what obstore reads from the environment: ``AZURE_STORAGE_ACCOUNT_KEY``,
   ``AZURE_STORAGE_SAS_TOKEN``, a service principal (``AZURE_CLIENT_ID`` + ``AZURE_CLIENT_SECRET``
   + ``AZURE_TENANT_ID``), workload identity on AKS (``AZURE_FEDERATED_TOKEN_FILE`` with client
   and tenant ids), the Azure CLI's login (``use_azure_cli=True`` or ``AZURE_USE_AZURE_CLI=true``),
   and otherwise a managed identity (IMDS) on Azure VMs, App Service and Container Apps. Any other
   ``AzureConfig`` entry of obstore can be passed in ``config=``.

The account name comes from ``account_name=``, the connection string or
``AZURE_STORAGE_ACCOUNT_NAME``; the endpoint from ``endpoint_url=``, the connection string,
``AZURE_STORAGE_ENDPOINT``, else ``https://{account}.blob.core.windows.net``. For Azurite and other
path-style endpoints, include the account: ``http://127.0.0.1:10000/devstoreaccount1``.

Install with ``pip install 'langgraph-handoff[obstore]'``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl, quote, urlparse

from langgraph_handoff.errors import (
    InvalidConfigError,
    MissingCredentialsError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from langgraph_handoff.stores.base import validate_key, validate_prefix
from langgraph_handoff.stores.credentials import missing_credentials
from langgraph_handoff.stores.obstore_base import ObstoreBase, brief, client_options, import_obstore, retry_config
from langgraph_handoff.stores.redact import redact_url
from langgraph_handoff.stores.timeouts import RetryBudget, Timeouts

__all__ = ["AZURITE_ACCOUNT", "AZURITE_KEY", "AzureBlobStore", "parse_connection_string"]

#: ``config=`` entries (obstore's ``AzureConfig``) that configure a credential
_CREDENTIAL_SETTINGS = (
    "account_key", "access_key", "master_key", "sas_key", "sas_token", "token", "bearer_token",
    "client_id", "client_secret", "federated_token_file", "use_azure_cli", "use_emulator", "skip_signature",
)  # fmt: skip
#: environment variables that give obstore a credential other than a managed identity
_CREDENTIAL_VARIABLES = (
    "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_MASTER_KEY", "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_TOKEN", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_USE_AZURE_CLI", "AZURE_STORAGE_USE_EMULATOR", "AZURE_SKIP_SIGNATURE",
)  # fmt: skip

#: Azurite's well-known development account and key (published in Microsoft's documentation)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

#: keys per Blob Batch request (Azure's limit is 256 sub-requests)
DELETE_BATCH = 256
#: the REST API version of the one request this module sends itself (Create Container)
API_VERSION = "2021-08-06"


def parse_connection_string(text: str) -> dict[str, str]:
    """An Azure Storage connection string as the settings this store reads.

    >>> parse_connection_string("AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net")
    {'account_name': 'acct', 'account_key': 'a2V5', 'endpoint_url': 'https://acct.blob.core.windows.net'}
    >>> parse_connection_string("UseDevelopmentStorage=true")["endpoint_url"]
    'http://127.0.0.1:10000/devstoreaccount1'
    """
    parts: dict[str, str] = {}
    for item in text.strip().strip(";").split(";"):
        name, sep, value = item.partition("=")
        if not sep:
            raise InvalidConfigError("an Azure connection string is 'Name=value' pairs separated by ';'")
        parts[name.strip().lower()] = value.strip()
    if parts.get("usedevelopmentstorage", "").lower() == "true":
        return {
            "account_name": AZURITE_ACCOUNT,
            "account_key": AZURITE_KEY,
            "endpoint_url": f"http://127.0.0.1:10000/{AZURITE_ACCOUNT}",
        }
    out: dict[str, str] = {}
    if "accountname" in parts:
        out["account_name"] = parts["accountname"]
    if "accountkey" in parts:
        out["account_key"] = parts["accountkey"]
    if "sharedaccesssignature" in parts:
        out["sas_token"] = parts["sharedaccesssignature"]
    if "blobendpoint" in parts:
        out["endpoint_url"] = parts["blobendpoint"].rstrip("/")
    elif "accountname" in parts and "endpointsuffix" in parts:
        protocol = parts.get("defaultendpointsprotocol", "https")
        out["endpoint_url"] = f"{protocol}://{parts['accountname']}.blob.{parts['endpointsuffix']}"
    return out


def shared_key_authorization(
    account: str, key: str, method: str, url: str, headers: Mapping[str, str], content_length: int = 0
) -> str:
    """The ``Authorization`` header of a Shared Key request (Azure Storage's documented scheme:
    HMAC-SHA256 over the verb, the standard headers, the ``x-ms-*`` headers and the resource).

    >>> shared_key_authorization("acct", "a2V5", "PUT", "https://acct.blob.core.windows.net/c?restype=container",
    ...                          {"x-ms-date": "Mon, 01 Jan 2024 00:00:00 GMT", "x-ms-version": "2021-08-06"})
    'SharedKey acct:...'
    """
    parsed = urlparse(url)
    lower = {name.lower(): value for name, value in headers.items()}
    standard = [
        "content-encoding",
        "content-language",
        "content-length",
        "content-md5",
        "content-type",
        "date",
        "if-modified-since",
        "if-match",
        "if-none-match",
        "if-unmodified-since",
        "range",
    ]
    lines = [method.upper()]
    for name in standard:
        value = str(content_length or "") if name == "content-length" else lower.get(name, "")
        lines.append(value)
    canonical_headers = "".join(f"{name}:{lower[name].strip()}\n" for name in sorted(lower) if name.startswith("x-ms-"))
    resource = f"/{account}{parsed.path or '/'}"
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(parsed.query, keep_blank_values=True):
        query.setdefault(name.lower(), []).append(value)
    resource += "".join(f"\n{name}:{','.join(sorted(query[name]))}" for name in sorted(query))
    to_sign = "\n".join(lines) + "\n" + canonical_headers + resource
    digest = hmac.new(base64.b64decode(key), to_sign.encode("utf-8"), hashlib.sha256).digest()
    return f"SharedKey {account}:{base64.b64encode(digest).decode()}"


class AzureBlobStore(ObstoreBase):
    """Objects in an Azure Blob Storage container under ``prefix``, through obstore.

    Args:
        container: the container (it must exist, or pass ``create_container=True``).
        prefix: blob-name prefix for everything this store writes, e.g. ``"prod/agents"``.
        account_name: the storage account; default: the connection string, else
            ``AZURE_STORAGE_ACCOUNT_NAME``.
        account_key: the account's Shared Key; default: the connection string, else obstore's
            ``AZURE_STORAGE_ACCOUNT_KEY``.
        sas_token: a shared access signature (``sv=...&sig=...``) instead of a key.
        bearer_token: a static Entra ID access token instead of a key (not renewed).
        connection_string: default ``AZURE_STORAGE_CONNECTION_STRING``.
        endpoint_url: the Blob service endpoint; path-style endpoints (Azurite) include the
            account, e.g. ``http://127.0.0.1:10000/devstoreaccount1``.
        use_azure_cli: sign with the Azure CLI's login (``az login``).
        config: further obstore ``AzureConfig`` entries (``client_id``, ``tenant_id``,
            ``msi_endpoint``, ...); they win over everything above.
        create_container: create the container if it does not exist (needs a key or a SAS).
        max_retries: obstore's retries for idempotent requests (conditional writes get none).
        timeout: seconds or a duration (``"15s"``) for one request's whole answer; default 15.
        connect_timeout: seconds or a duration to connect; default 5.
        deadline: seconds or a duration for one operation with its retries; default 30
            (:mod:`langgraph_handoff.stores.timeouts`).
        max_workers: threads for parallel requests and for the async API.
        headers: extra HTTP headers sent with every request.

    Example (needs a reachable server)::

        store = AzureBlobStore("agents", prefix="prod", account_name="myaccount")  # managed identity
        saver = ObjectStoreSaver(store)
    """

    _service = "Azure Blob"
    _refused_hint = "check the credentials, their role on the container (Storage Blob Data Contributor) or the SAS"
    _bulk_delete = "Blob Batch delete"

    def __init__(
        self,
        container: str,
        prefix: str = "",
        *,
        account_name: str | None = None,
        account_key: str | None = None,
        sas_token: str | None = None,
        bearer_token: str | None = None,
        connection_string: str | None = None,
        endpoint_url: str | None = None,
        use_azure_cli: bool = False,
        config: Mapping[str, Any] | None = None,
        create_container: bool = False,
        max_retries: int = 4,
        timeout: float | str | None = None,
        max_workers: int = 32,
        headers: dict[str, str] | None = None,
        connect_timeout: float | str | None = None,
        deadline: float | str | None = None,
    ) -> None:
        self.timeouts = Timeouts.of(connect_timeout, timeout, deadline)
        obs = import_obstore()
        if not container:
            raise InvalidConfigError("AzureBlobStore needs a container name: az://container/prefix")
        self.container = container
        prefix = prefix.strip("/")
        self.prefix = validate_prefix(prefix + "/") if prefix else ""

        conn_text = connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        conn = parse_connection_string(conn_text) if conn_text else {}
        account = (
            account_name
            or conn.get("account_name")
            or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
            or (config or {}).get("account_name")
        )
        if not account:
            raise InvalidConfigError(
                "no Azure storage account: name it in the store URL (az://container/prefix?account_name=ACCOUNT) "
                "or with account_name=, or set AZURE_STORAGE_ACCOUNT_NAME or AZURE_STORAGE_CONNECTION_STRING"
            )
        self.account_name: str = str(account)
        self.endpoint_url = (
            endpoint_url
            or conn.get("endpoint_url")
            or os.environ.get("AZURE_STORAGE_ENDPOINT")
            or os.environ.get("AZURE_ENDPOINT")
            or f"https://{self.account_name}.blob.core.windows.net"
        ).rstrip("/")
        settings: dict[str, Any] = {"account_name": self.account_name, "endpoint": self.endpoint_url}
        explicit = account_key or sas_token or bearer_token
        if account_key or (not explicit and conn.get("account_key")):
            settings["account_key"] = account_key or conn["account_key"]
        elif sas_token or (not explicit and conn.get("sas_token")):
            settings["sas_key"] = (sas_token or conn["sas_token"]).lstrip("?")
        elif bearer_token:
            settings["token"] = bearer_token
        if use_azure_cli:
            settings["use_azure_cli"] = True
        settings.update(config or {})
        #: the Shared Key or SAS that :meth:`ensure_container` can sign with (obstore hides its own)
        self._signing = (
            settings.get("account_key")
            or os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
            or os.environ.get("AZURE_STORAGE_ACCESS_KEY")
            or os.environ.get("AZURE_STORAGE_MASTER_KEY"),
            settings.get("sas_key")
            or os.environ.get("AZURE_STORAGE_SAS_KEY")
            or os.environ.get("AZURE_STORAGE_SAS_TOKEN"),
        )

        #: True when nothing but a managed identity can give credentials: its token request failing
        #: then means there are none here (off Azure, IMDS has no identity to give)
        self._identity_only = not (
            {"account_key", "sas_key", "token", "use_azure_cli"} & settings.keys()
            or any(k in (config or {}) for k in _CREDENTIAL_SETTINGS)
            or any(os.environ.get(name) for name in _CREDENTIAL_VARIABLES)
        )
        options = client_options(self.endpoint_url, self.timeouts, headers)

        def make(retries: int) -> Any:
            return obs.store.AzureStore(
                container,
                prefix=prefix or None,
                config=settings,
                client_options=options,
                retry_config=retry_config(retries, self.timeouts),
            )

        self._start(obs, max_workers=max_workers, thread_name_prefix="obstore-azure")
        self._clients = (make(max_retries), make(0))
        if create_container:
            self.ensure_container()

    def __repr__(self) -> str:
        return (
            f"AzureBlobStore(container={self.container!r}, prefix={self.prefix!r}, "
            f"endpoint={redact_url(self.endpoint_url)!r})"
        )

    def trust_scope(self) -> tuple[str, ...]:
        """One probe verdict per account endpoint, container and prefix."""
        return ("az", self.endpoint_url, self.container, self.prefix)

    # -- Azure's quirks --------------------------------------------------------------------------
    def _store_missing(self, exc: BaseException) -> StoreError | None:
        if "ContainerNotFound" in str(exc) or "container does not exist" in str(exc):
            return StoreNotFoundError(
                f"the Azure container {self.container!r} does not exist at {redact_url(self.endpoint_url)}: create it "
                "(az storage container create, or create_container=True with a key or SAS)"
            )
        return None

    def _credentials_missing(self, exc: BaseException) -> MissingCredentialsError | None:
        if self._identity_only and "token request" in str(exc):
            return missing_credentials(
                "az",
                f"Azure container {self.container!r}",
                f"no key, SAS or token is configured, and no managed identity answered: {brief(exc)}",
            )
        return None

    def delete_many(self, keys: Sequence[str]) -> None:
        """Unconditional delete of ``keys``, every one of them: Blob Batch requests of at most
        256 keys; a batch that fails (obstore stops at its first missing key and drops the rest)
        is deleted again key by key, a missing key counting as deleted."""
        paths = [validate_key(k) for k in keys]
        for i in range(0, len(paths), DELETE_BATCH):
            batch = paths[i : i + DELETE_BATCH]
            try:
                self._obs.delete(self._store, batch)
            except self._errors as exc:
                missing = self._store_missing(exc)
                if missing is not None:
                    raise missing from None
                for key in batch:
                    self.delete(key)

    # -- setup -----------------------------------------------------------------------------------
    def ensure_container(self) -> None:
        """Create the container if it does not exist (idempotent): one Create Container request,
        signed with the account key or carrying the SAS, since obstore has no API for it. With
        other credentials (managed identity, service principal, CLI) create it beforehand, e.g.
        ``az storage container create --name NAME --account-name ACCOUNT --auth-mode login``."""
        key, sas = self._signing
        if not key and not sas:
            raise StoreError(
                f"cannot create the Azure container {self.container!r} without an account key or a SAS token: "
                "create it beforehand (az storage container create ... --auth-mode login) and leave "
                "create_container off"
            )
        # idempotent (409: it exists), so a reset, a lost answer or a 5xx is sent again, within
        # the store's deadline, as every idempotent request is
        budget = RetryBudget(self.timeouts, attempts=5)
        while True:
            try:
                with urllib.request.urlopen(self._create_request(key, sas), timeout=self.timeouts.deadline):
                    return  # 201 Created
            except urllib.error.HTTPError as exc:
                with exc:  # the error holds the response and its connection
                    if exc.code == 409:  # ContainerAlreadyExists (or being deleted: the next request says so)
                        return  # (its body is not read: a body cut off would change nothing)
                    try:
                        detail = exc.read()[:300].decode("utf-8", "replace")
                    except OSError as cut:
                        detail = f"(the answer's body was cut off: {brief(cut)})"
                failure: Exception = StoreError(
                    f"creating the Azure container {self.container!r} failed: HTTP {exc.code} {detail}"
                )
                if exc.code < 500 and exc.code != 429:
                    raise failure from None
            except OSError as exc:
                failure = StoreUnavailableError(
                    f"creating the Azure container {self.container!r} failed: {brief(exc)}; check the endpoint"
                )
            pause = budget.pause()
            if pause is None:
                raise failure from None
            time.sleep(pause)

    def _create_request(self, key: str | None, sas: str | None) -> urllib.request.Request:
        url = f"{self.endpoint_url}/{quote(self.container)}?restype=container"
        # urllib would add a Content-Type of its own to a PUT with a body; the signature covers it
        headers = {"Content-Type": "application/octet-stream", "x-ms-date": formatdate(usegmt=True)}
        headers["x-ms-version"] = API_VERSION
        if key:
            headers["Authorization"] = shared_key_authorization(self.account_name, key, "PUT", url, headers)
        else:
            url += "&" + (sas or "").lstrip("?")
        return urllib.request.Request(url, data=b"", method="PUT", headers=headers)
