"""Store URLs refuse what they would otherwise ignore (langgraph_handoff/stores/urls.py).

Found by a new user: ``s3://bucket/app?endpoint=http://...`` (a typo for ``endpoint_url``) was
read as ``s3://bucket/app`` and talked to AWS, where ``prune``, ``delete`` or ``migrate`` would act
on a bucket of the same name. Every test here fails on the code before this change: the
parameter or argument was dropped without a word."""

from __future__ import annotations

import pytest

from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.errors import InvalidConfigError
from langgraph_handoff.memory import ObjectStoreMemory
from langgraph_handoff.server import ServerSettings
from langgraph_handoff.stores.urls import store_from_url


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials in the environment, so the S3 stores can be built (nothing is sent)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret" * 6)


@pytest.mark.parametrize(
    ("url", "typo", "meant", "accepted"),
    [
        (
            "s3://agents/app?endpoint=http://127.0.0.1:7480",
            "endpoint",
            "'endpoint_url'",
            "async_io, connect_timeout, deadline, endpoint_url",
        ),
        ("s3://agents/app?region_name=eu-west-1", "region_name", "'region'", "region, timeout, transport"),
        ("s3://agents/app?endpoint_url=http://127.0.0.1:7480&transprot=boto3", "transprot", "'transport'", "region"),
        (
            "az://agents/app?acount_name=dev",
            "acount_name",
            "'account_name'",
            "account, account_name, connect_timeout, deadline, endpoint_url, timeout",
        ),
        ("gs://agents/app?projet=p1", "projet", "'project'", "endpoint_url, project"),
        ("gs://agents/app?endpoint=http://127.0.0.1:4443", "endpoint", "'endpoint_url'", "endpoint_url, project"),
    ],
)
def test_an_unknown_query_parameter_is_refused_with_the_close_matches(
    url: str, typo: str, meant: str, accepted: str
) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        ObjectStoreSaver.from_url(url)
    message = str(refused.value)
    assert f"unknown parameter {typo!r}: did you mean {meant}" in message, message
    assert accepted in message, message
    assert "?" not in message.split("did you mean")[0], "the query (maybe secrets) is not echoed"
    with pytest.raises(InvalidConfigError, match="did you mean"):
        ObjectStoreMemory.from_url(url)


@pytest.mark.parametrize("url", ["memory://?fsync=0", "memory://shared?ttl=5"])
def test_memory_urls_take_no_parameters(url: str) -> None:
    with pytest.raises(InvalidConfigError, match="URLs take no parameters"):
        store_from_url(url)


def test_file_urls_take_mode_alone() -> None:
    with pytest.raises(InvalidConfigError, match=r"unknown parameter 'fsync'\. file:// URLs accept: mode$"):
        store_from_url("file:///tmp/lgh-urls?fsync=0")
    with pytest.raises(InvalidConfigError, match="unknown parameter 'mod': did you mean 'mode'"):
        store_from_url("file:///tmp/lgh-urls?mod=0750")


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("s3://agents/app?endpoint_url=", "'endpoint_url' is empty"),
        ("s3://agents/app?endpoint_url", "'endpoint_url' is empty"),
        ("s3://agents/app?region=eu-west-1&region=us-east-1", "gives 'region' twice"),
        ("s3://agents/app?transport=boto3&async_io=loop", "async_io applies to the obstore transport only"),
        ("az://agents/app?account=a&account_name=b", "account and account_name differ"),
    ],
)
def test_empty_repeated_or_inapplicable_parameters_are_refused(url: str, match: str) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        store_from_url(url)


@pytest.mark.parametrize(
    ("url", "kwargs", "match"),
    [
        ("memory://", {"create_bucket": True}, "MemoryStore .* has no argument 'create_bucket'. It takes no arguments"),
        ("memory://", {"transport": "boto3"}, "transport='boto3' applies to s3:// URLs only"),
        ("file:///tmp/lgh-urls-kw", {"fsynk": False}, "has no argument 'fsynk': did you mean 'fsync'"),
        ("file:///tmp/lgh-urls-kw", {"transport": "boto3"}, "applies to s3:// URLs only"),
        ("s3://agents/app", {"endpoint": "http://127.0.0.1:7480"}, "did you mean 'endpoint_url'"),
        ("s3://agents/app?transport=boto3", {"async_io": "loop"}, "S3Store .* has no argument 'async_io'"),
        ("s3://agents/app?region=eu-west-1", {"region_name": "us-east-1"}, "contradicts the URL's region"),
        ("s3://agents/app?transport=obstore", {"transport": "boto3"}, "contradicts the URL's transport"),
        ("az://agents/app", {"acount_key": "k"}, "did you mean 'account_key'"),
        ("gs://agents/app", {"emulator": "http://127.0.0.1:4443"}, "GCSStore .* has no argument 'emulator'"),
    ],
)
def test_an_unknown_or_contradicting_keyword_argument_is_refused(
    url: str, kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        store_from_url(url, **kwargs)  # type: ignore[arg-type]


def test_saver_arguments_given_to_from_url_reach_the_saver() -> None:
    """``cache_size`` and ``cache_bytes`` are the saver's, but ``from_url`` handed them to the
    store, and ``MemoryStore`` dropped them: the cache kept its default size."""
    saver = ObjectStoreSaver.from_url("memory://", cache_size=3, cache_bytes=4096)
    assert (saver._cache._max, saver._cache._max_bytes) == (3, 4096)


def test_the_server_refuses_a_mistyped_url_at_startup() -> None:
    with pytest.raises(InvalidConfigError, match=r"LANGGRAPH_HANDOFF_URL: .* did you mean 'endpoint_url'"):
        ServerSettings.from_env({"LANGGRAPH_HANDOFF_URL": "s3://agents/prod?endpoint=http://127.0.0.1:7480"})


def test_the_command_line_refuses_a_mistyped_url_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from langgraph_handoff.cli import main

    assert main(["doctor", "s3://agents/prod?endpoint=http://127.0.0.1:9"]) == 2
    assert "unknown parameter 'endpoint': did you mean 'endpoint_url'?" in " ".join(capsys.readouterr().err.split())


def test_every_scheme_is_documented_where_urls_are_taken() -> None:
    from langgraph_handoff.cli import Url

    help_text = Url.__metadata__[0].help
    for scheme in ("s3://", "az://", "gs://", "file://", "memory://"):
        assert scheme in (ObjectStoreSaver.from_url.__doc__ or ""), scheme
        assert scheme in (ObjectStoreMemory.from_url.__doc__ or ""), scheme
        assert scheme in help_text, scheme


def test_what_a_url_may_say_still_works() -> None:
    boto = store_from_url("s3://agents/app?endpoint_url=http://127.0.0.1:9&transport=boto3", region_name="eu-west-1")
    assert type(boto).__name__ == "S3Store" and boto.client.meta.region_name == "eu-west-1"  # type: ignore[attr-defined]
    boto.close()


@pytest.mark.obstore
def test_what_an_obstore_url_may_say_still_works() -> None:
    store = store_from_url("s3://agents/app/x?endpoint_url=http://127.0.0.1:9&region=eu-west-1&async_io=threads")
    assert (store.bucket, store.prefix, store.endpoint_url, store.region_name) == (  # type: ignore[attr-defined]
        "agents",
        "app/x/",
        "http://127.0.0.1:9",
        "eu-west-1",
    )
    assert store._wire is None  # type: ignore[attr-defined]  # async_io=threads reached it
    store.close()
