"""A remote store with no credentials says so at once, on every transport, with what to set.

boto3 used to retry its ``NoCredentialsError`` five times and end in ``StoreUnavailableError``
("... or retry later"), and a conditional PUT reported it as ``UnknownOutcomeError`` although
nothing was sent; GCS let google.auth's ``DefaultCredentialsError`` out of the constructor. No
network is needed: every credential source is switched off and the endpoint is ``127.0.0.1:1``,
where nothing listens (a request that went out would fail differently)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from langgraph_handoff.errors import InvalidConfigError, MissingCredentialsError, StoreError
from langgraph_handoff.stores.urls import store_from_url

NOWHERE = "http://127.0.0.1:1"


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS or Google credential source: environment, shared files, instance metadata, gcloud."""
    import os

    for name in list(os.environ):
        if (
            name.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_", "AZURE_", "MSI_", "IDENTITY_"))
            or name == "STORAGE_EMULATOR_HOST"
        ):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no application-default login
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # google.auth: do not ask a metadata server
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it keeps the credentials an earlier test found
    monkeypatch.setenv("AZURE_MSI_ENDPOINT", f"{NOWHERE}/token")  # a managed identity that is not there


def _calls(store: Any) -> list[str]:
    """The operations botocore starts on ``store``'s client (each attempt is one)."""
    seen: list[str] = []
    store.client.meta.events.register("before-call.s3", lambda model, **_: seen.append(model.name))
    return seen


async def test_boto3_says_at_once_that_there_are_no_credentials(no_credentials: None) -> None:
    """Each request, sync and async, idempotent or conditional, fails on its first attempt with
    ``MissingCredentialsError`` naming the environment variables; none is retried."""
    store = store_from_url(f"s3://b/p?transport=boto3&endpoint_url={NOWHERE}&region=us-east-1")
    seen = _calls(store)
    try:
        requests = [
            ("GetObject", lambda: store.get("k")),
            ("PutObject", lambda: store.put("k", b"x")),
            ("PutObject", lambda: store.put("k", b"x", if_none_match=True)),  # was UnknownOutcomeError
            ("PutObject", lambda: store.put("k", b"x", if_match="e")),
            ("ListObjectsV2", lambda: store.list_page("")),
            ("DeleteObject", lambda: store.delete("k")),
        ]
        for operation, request in requests:
            seen.clear()
            with pytest.raises(MissingCredentialsError) as caught:
                request()
            assert seen == [operation], f"{operation}: {seen}"
            message = str(caught.value)
            assert "AWS_ACCESS_KEY_ID" in message and "nothing was sent" in message and "retry" not in message
        seen.clear()
        with pytest.raises(MissingCredentialsError):
            await store.aget("k")
        assert seen == ["GetObject"]
    finally:
        store.close()


@pytest.mark.obstore
def test_obstore_says_it_with_the_same_error(no_credentials: None) -> None:
    """The obstore transport already refused at once; it raises the same class and advice now
    (still an ``InvalidConfigError``, as before)."""
    with pytest.raises(MissingCredentialsError, match="AWS_ACCESS_KEY_ID") as caught:
        store_from_url(f"s3://b/p?transport=obstore&endpoint_url={NOWHERE}&region=us-east-1")
    assert isinstance(caught.value, InvalidConfigError)


def test_gcs_says_it_instead_of_google_auths_error(no_credentials: None) -> None:
    """``gs://`` without Application Default Credentials: a typed error naming what to set, not
    google.auth's ``DefaultCredentialsError`` out of the constructor."""
    with pytest.raises(MissingCredentialsError, match="GOOGLE_APPLICATION_CREDENTIALS") as caught:
        store_from_url("gs://b/p")
    assert "STORAGE_EMULATOR_HOST" in str(caught.value)


@pytest.mark.obstore
async def test_azure_says_it_when_only_a_managed_identity_could_have_answered(no_credentials: None) -> None:
    """``az://`` with no key, SAS or token and no managed identity: the token request fails, and
    that is reported as missing credentials, not as "kept failing ... retry later" (nor, for a
    conditional PUT, as an unknown outcome: the PUT was never sent)."""
    store = store_from_url(f"az://c/p?account_name=acct&endpoint_url={NOWHERE}")
    try:
        for request in (lambda: store.get("k"), lambda: store.put("k", b"x", if_none_match=True)):
            with pytest.raises(MissingCredentialsError, match="AZURE_STORAGE_ACCOUNT_KEY") as caught:
                request()
            assert "account_name" in str(caught.value) and "retry later" not in str(caught.value)
        with pytest.raises(MissingCredentialsError):
            await store.aget("k")
    finally:
        store.close()


@pytest.mark.obstore
def test_azure_with_a_key_keeps_its_own_error(no_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A configured key is not "no credentials": a failure then is about the endpoint."""
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    store = store_from_url(f"az://c/p?account_name=acct&endpoint_url={NOWHERE}&deadline=1")
    try:
        with pytest.raises(StoreError) as caught:
            store.get("k")
        assert "Check the endpoint" in str(caught.value)
    finally:
        store.close()
