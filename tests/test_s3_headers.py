"""Both S3 transports send the headers a service needs: Tigris evaluates conditions on the leader
only with ``X-Tigris-Consistent: true``; a caller's own ``headers`` are sent too."""

from __future__ import annotations

import boto3
import pytest

from langgraph_handoff.stores import ObstoreS3Store, S3Store
from langgraph_handoff.stores.s3_compat import default_headers
from tests.canned_s3 import canned_s3


def _stores(endpoint: str, headers: dict[str, str] | None) -> list[object]:
    session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="secret" * 6)
    client = session.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    return [
        S3Store("b", client=client, headers=headers),
        ObstoreS3Store("b", endpoint_url=endpoint, session=session, headers=headers),
    ]


@pytest.mark.parametrize("transport", [0, 1], ids=["boto3", "obstore"])
def test_caller_headers_reach_the_server(transport: int) -> None:
    with canned_s3() as (endpoint, seen):
        store = _stores(endpoint, {"X-Tigris-Consistent": "true"})[transport]
        store.put("200/k", b"x", if_none_match=True)  # type: ignore[attr-defined]
        store.get("200/k")  # type: ignore[attr-defined]
        store.close()  # type: ignore[attr-defined]
    assert len(seen) == 2 and all(h.get("x-tigris-consistent") == "true" for h in seen), seen


@pytest.mark.parametrize("transport", [0, 1], ids=["boto3", "obstore"])
def test_no_extra_headers_elsewhere(transport: int) -> None:
    with canned_s3() as (endpoint, seen):
        store = _stores(endpoint, None)[transport]
        store.put("200/k", b"x")  # type: ignore[attr-defined]
        store.close()  # type: ignore[attr-defined]
    assert "x-tigris-consistent" not in seen[0]


def test_tigris_endpoints_get_the_consistency_header() -> None:
    assert default_headers("https://fly.storage.tigris.dev") == {"X-Tigris-Consistent": "true"}
    assert default_headers("https://t3.storage.dev") == {"X-Tigris-Consistent": "true"}
    assert default_headers("https://eviltigris.dev.example.com") == {}
    assert default_headers("https://t3.storage.dev", {"X-Tigris-Consistent": "false"}) == {
        "X-Tigris-Consistent": "false"
    }
