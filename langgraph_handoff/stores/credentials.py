"""Where each remote store looks for credentials, said once for every transport's error message.

A store with no credentials fails the same way whichever transport serves it: at once, with
:class:`~langgraph_handoff.errors.MissingCredentialsError` naming what to set. Retrying cannot
find credentials that are not configured, and "retry later" sends the user the wrong way.
Credentials never go in a store URL (:mod:`.urls` refuses user info), so the advice names
environment variables and constructor arguments, and the URL parameters that go with them.
"""

from __future__ import annotations

from langgraph_handoff.errors import MissingCredentialsError

__all__ = ["WHERE", "missing_credentials"]

#: where each scheme's credentials come from, in the words of the advice
WHERE = {
    "s3": (
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (plus AWS_SESSION_TOKEN for temporary keys), "
        "AWS_PROFILE for a ~/.aws profile, or an instance/container role; in Python, client= (boto3) "
        "or session= (obstore). A server of your own (MinIO, Ceph RGW) still needs keys: "
        "the URL gives only its address (?endpoint_url=)"
    ),
    "az": (
        "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING, a managed "
        "identity, or `az login` with use_azure_cli=True; in Python, account_key= or sas_token=. "
        "The URL names the account (?account_name=)"
    ),
    "gs": (
        "GOOGLE_APPLICATION_CREDENTIALS (a service account key file), `gcloud auth application-default "
        "login`, or the metadata server on Google Cloud; in Python, credentials=. An emulator needs none: "
        "?endpoint_url= or STORAGE_EMULATOR_HOST"
    ),
}


def missing_credentials(scheme: str, store: str, detail: str) -> MissingCredentialsError:
    """The error for a ``scheme`` store that found no credentials (``detail``: what the client said)."""
    return MissingCredentialsError(store, detail, WHERE[scheme])
