"""No error message or log line repeats what a store URL may hold that is secret.

Found in a security review: configuration errors repeated the URL whole, or the values of its
parameters: an Azure SAS URL given with its ``https`` scheme, ``s3://KEY:SECRET@bucket`` (the
bucket check quoted ``'KEY:SECRET@bucket'``), a repeated ``endpoint_url`` (both values quoted), a
URL with no bucket; and the Agent Server logs the factory's error at startup. Now a message
shows a URL without its query values, user info or fragment (``stores/redact.py``), names a
parameter but never its value, and refuses user info outright. Each case is checked where a
user meets it: the store URL itself, the Agent Server's settings and factories (their
exception, and the log the server writes of it), and the command line's error output."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.server import ServerSettings, checkpointer, store
from langgraph_handoff.stores.redact import redact_url, redact_urls
from langgraph_handoff.stores.urls import store_from_url

#: (URL, what must never be shown, what the message must still say)
CASES = [
    pytest.param(
        "https://acct.blob.core.windows.net/agents?sv=2022-11-02&sp=rwdl&se=2031-01-01&sig=SASSIGNATURE%3D",
        ["SASSIGNATURE", "rwdl", "2031-01-01"],
        "store URL",
        id="azure-sas-url-unknown-scheme",
    ),
    pytest.param("s3://AKIDLEAK:SECRETLEAK@agents/prod", ["AKIDLEAK", "SECRETLEAK"], "user info", id="s3-user-info"),
    pytest.param(
        "s3://AKIDLEAK:HALFONE/HALFTWO@agents/prod",
        ["AKIDLEAK", "HALFONE", "HALFTWO"],
        "user info",
        id="s3-secret-with-slash",
    ),
    pytest.param(
        "s3://agents/prod?endpoint_url=http://127.0.0.1:7480&endpoint_url=http://USERLEAK:PWLEAK@evil.example:9",
        ["USERLEAK", "PWLEAK", "evil.example", "127.0.0.1"],
        "gives 'endpoint_url' twice",
        id="repeated-endpoint-url",
    ),
    pytest.param(
        "s3:///prod?endpoint_url=http://USERLEAK:PWLEAK@h:9", ["USERLEAK", "PWLEAK"], "names no bucket", id="no-bucket"
    ),
    pytest.param(
        "az:///prod?account_name=ACCTLEAK&endpoint_url=http://USERLEAK:PWLEAK@h:9",
        ["ACCTLEAK", "USERLEAK", "PWLEAK"],
        "names no container",
        id="no-container",
    ),
    pytest.param("gs:///prod?project=PROJLEAK", ["PROJLEAK"], "names no bucket", id="gcs-no-bucket"),
    pytest.param(
        "s3://agents/prod?endpont_url=http://USERLEAK:PWLEAK@h:9",
        ["USERLEAK", "PWLEAK"],
        "unknown parameter 'endpont_url': did you mean 'endpoint_url'?",
        id="mistyped-parameter",
    ),
    pytest.param(
        "az://agents/prod?account_name=dev&sig=SASSIGNATURE",
        ["SASSIGNATURE"],
        "unknown parameter 'sig'",
        id="sas-in-az",
    ),
    pytest.param("s3://agents/prod?=VALUELEAK", ["VALUELEAK"], "unknown parameter ''", id="nameless-parameter"),
    pytest.param("s3://agents/prod?transport=TRANSPORTLEAK", ["TRANSPORTLEAK"], "unknown S3 transport", id="transport"),
    pytest.param("file://USERLEAK:PWLEAK@host/dir", ["USERLEAK", "PWLEAK"], "user info", id="file-user-info"),
    pytest.param("memory://USERLEAK:PWLEAK@name", ["USERLEAK", "PWLEAK"], "user info", id="memory-user-info"),
]


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret" * 6)


def _hidden(text: str, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in text, f"{secret!r} shown in: {text}"


@pytest.mark.parametrize(("url", "secrets", "says"), CASES)
def test_a_store_url_error_never_repeats_a_secret(url: str, secrets: list[str], says: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        store_from_url(url)
    assert says in str(refused.value)
    _hidden(str(refused.value), secrets)


@pytest.mark.parametrize(("url", "secrets", "says"), CASES)
def test_the_agent_server_factories_and_their_log_never_repeat_a_secret(
    url: str, secrets: list[str], says: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The server enters each factory at startup and logs what it raises, traceback and all
    (here: ``logger.exception``, as the server does); the settings are also checked alone."""
    env = {"LANGGRAPH_HANDOFF_URL": url}
    server_log = logging.getLogger("langgraph_api.test")

    async def enter(factory: Any) -> None:
        async with factory(env):
            raise AssertionError("the factory accepted the URL")

    caplog.set_level(logging.DEBUG)
    for factory in (checkpointer, store):
        try:
            asyncio.run(enter(factory))
        except InvalidConfigError as exc:
            assert says in str(exc)
            server_log.exception("failed to start: %s", exc)
    assert caplog.text.count("LANGGRAPH_HANDOFF_URL") >= 2
    _hidden(caplog.text, secrets)
    try:
        ServerSettings.from_env(env).object_store().close()
    except InvalidConfigError as exc:
        _hidden(str(exc), secrets)


@pytest.mark.parametrize(("url", "secrets", "says"), CASES)
def test_the_command_line_never_repeats_a_secret(
    url: str, secrets: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph_handoff.cli import main

    assert main(["threads", url]) == 2
    printed = capsys.readouterr()
    assert says in " ".join(printed.err.split())
    _hidden(printed.out + printed.err, secrets)


@pytest.mark.parametrize(
    ("url", "given", "secrets"),
    [
        ("s3://agents/p?region=REGIONLEAK", {"region_name": "OTHERLEAK"}, ["REGIONLEAK", "OTHERLEAK"]),
        ("az://agents/p?account_name=ACCTLEAK", {"account_name": "OTHERLEAK"}, ["ACCTLEAK", "OTHERLEAK"]),
        ("s3://agents/p?transport=obstore", {"transport": "boto3"}, ["obstore"]),
    ],
)
def test_an_argument_contradicting_the_url_names_both_values_nowhere(
    url: str, given: dict[str, str], secrets: list[str]
) -> None:
    with pytest.raises(InvalidConfigError, match="contradicts the URL's") as refused:
        store_from_url(url, **given)
    _hidden(str(refused.value), secrets)


def test_the_next_step_the_command_line_prints_shows_the_url_redacted() -> None:
    from langgraph_handoff.cli.app import next_step
    from langgraph_handoff.errors import ThreadNotFoundError

    hint = next_step(ThreadNotFoundError("t1"), "s3://agents/p?endpoint_url=http://USERLEAK:PWLEAK@h:9", None)
    assert hint is not None and "s3://agents/p?endpoint_url=***" in hint
    _hidden(hint, ["USERLEAK", "PWLEAK"])


ENDPOINT = "http://USERLEAK:PWLEAK@127.0.0.1:9/devstoreaccount1?sig=SASLEAK"


def test_a_missing_bucket_names_its_endpoint_redacted() -> None:
    from langgraph_handoff.stores.s3_compat import no_such_bucket

    message = str(no_such_bucket("agents", ENDPOINT))
    assert "http://***@127.0.0.1:9/devstoreaccount1?sig=***" in message
    _hidden(message, ["USERLEAK", "PWLEAK", "SASLEAK"])


def test_the_gcs_store_shows_its_endpoint_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph_handoff.stores.gcs import GCSStore, _brief

    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    gcs = GCSStore("bkt", "p", endpoint_url=ENDPOINT)
    try:
        for text in (repr(gcs), str(gcs._no_bucket())):
            _hidden(text, ["USERLEAK", "PWLEAK", "SASLEAK"])
    finally:
        gcs.close()
    _hidden(_brief(OSError(f"Connection refused for url {ENDPOINT}")), ["USERLEAK", "PWLEAK", "SASLEAK"])


@pytest.mark.obstore
def test_the_azure_store_and_obstore_errors_show_urls_redacted() -> None:
    """obstore's error names the request URL, and an Azure store's URL carries its SAS token."""
    from langgraph_handoff.stores.obstore_azure import AzureBlobStore
    from langgraph_handoff.stores.obstore_base import brief

    azure = AzureBlobStore("agents", "p", account_name="devstoreaccount1", account_key="a2V5", endpoint_url=ENDPOINT)
    try:
        for text in (repr(azure), str(azure._store_missing(Exception("ContainerNotFound")))):
            _hidden(text, ["USERLEAK", "PWLEAK", "SASLEAK"])
    finally:
        azure.close()
    error = Exception(
        "Generic MicrosoftAzure error: Error performing GET "
        "https://acct.blob.core.windows.net/agents/p/k?sv=2022-11-02&sig=SASLEAK%3D in 3ms: timed out\nDebug: ..."
    )
    assert brief(error) == (
        "Generic MicrosoftAzure error: Error performing GET "
        "https://acct.blob.core.windows.net/agents/p/k?sv=***&sig=*** in 3ms: timed out"
    )


def test_the_loop_client_refuses_an_endpoint_without_repeating_it() -> None:
    from langgraph_handoff.stores.loop_http import Origin

    with pytest.raises(ValueError, match=r"not an http\(s\) URL") as refused:
        Origin.from_url("ftp://USERLEAK:PWLEAK@h/p?sig=SASLEAK")
    _hidden(str(refused.value), ["USERLEAK", "PWLEAK", "SASLEAK"])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("s3://agents/prod?endpoint_url=http://127.0.0.1:7480", "s3://agents/prod?endpoint_url=***"),
        ("s3://K:S@agents/prod", "s3://***@agents/prod"),
        ("s3://K:S/S@agents/prod", "s3://***@agents/prod"),
        ("https://a.blob.core.windows.net/c?sv=1&sig=x#frag", "https://a.blob.core.windows.net/c?sv=***&sig=***#***"),
        ("https://h/?token", "https://h/?***"),
        ("K:S@agents", "***"),
        ("az://[::1?sig=x", "az://***"),
        ("file:///var/lib/agents", "file:///var/lib/agents"),
        ("memory://", "memory://"),
    ],
)
def test_what_a_redacted_url_shows(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    if "://" in url:  # what reads as a URL inside a text
        assert redact_urls(f"error at {url} (retrying)") == f"error at {shown} (retrying)"


def test_server_settings_repr_shows_its_url_redacted() -> None:
    """The settings' repr lands in logs and tracebacks: the URL's parameter values are hidden."""
    url = "s3://agents/prod?endpoint_url=http://10.0.0.5:7480&region=SECRET-REGION"
    shown = repr(ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": url}))
    assert "SECRET-REGION" not in shown and "10.0.0.5" not in shown and "s3://agents/prod?" in shown


def test_boto3_errors_show_the_urls_they_quote_redacted() -> None:
    """botocore quotes the URL it failed to reach; a query on it (a presigned request's, a
    proxy's token) is not repeated in the StoreError."""
    from botocore.exceptions import EndpointConnectionError

    from langgraph_handoff.errors import StoreError
    from langgraph_handoff.stores import S3Store

    store = S3Store("agents", endpoint_url="http://127.0.0.1:9", extra_retries=0)

    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/agents/k?X-Amz-Security-Token=SECRET")

    store.client.get_object = refuse  # type: ignore[method-assign]
    with pytest.raises(StoreError) as info:
        store.get("k")
    assert "SECRET" not in str(info.value) and "127.0.0.1:9/agents/k?" in str(info.value)
    store.close()
