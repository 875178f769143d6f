"""SigV4 as the loop-native S3 client signs it (langgraph_handoff/stores/sigv4.py), checked against
AWS's published example and against botocore's own signer on the requests the store sends."""

from __future__ import annotations

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from langgraph_handoff.stores.sigv4 import EMPTY_SHA256, UNSIGNED, Keys, canonical_query, quote_path, sign

AMZ_DATE = "20261201T101500Z"


def test_the_aws_documented_get_object_example() -> None:
    """'Example: GET Object' of the S3 SigV4 documentation, signature included."""
    keys = Keys("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    headers = sign(
        keys, "us-east-1", "GET", "examplebucket.s3.amazonaws.com", "/test.txt", "",
        {"Range": "bytes=0-9"}, EMPTY_SHA256, amz_date="20130524T000000Z",
    )  # fmt: skip
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def botocore_signature(method: str, url: str, headers: dict[str, str], keys: Keys, region: str) -> str:
    """botocore's signature for the same request, headers and time."""
    request = AWSRequest(method=method, url=url, headers=headers)
    request.context["timestamp"] = AMZ_DATE
    auth = S3SigV4Auth(Credentials(keys.access_key, keys.secret_key, keys.token), "s3", region)
    canonical = auth.canonical_request(request)
    return str(auth.signature(auth.string_to_sign(request, canonical), request))


@pytest.mark.parametrize(
    ("method", "path", "query", "extra", "payload", "token"),
    [
        ("PUT", "/agents/prod/heads/t-1/=", {}, {"if-match": "0123abcd"}, "sha", None),
        ("PUT", "/agents/prod/writes/t%2/x", {}, {"if-none-match": "*"}, UNSIGNED, "FQoGZXIvYXdzEJr//token=="),
        (
            "GET",
            "/agents",
            {"list-type": "2", "prefix": "prod/writes/t-1/", "max-keys": "1000"},
            {},
            EMPTY_SHA256,
            None,
        ),
        ("GET", "/agents", {"list-type": "2", "prefix": "p/a b", "start-after": "p/a=1"}, {}, EMPTY_SHA256, "tok"),
        ("DELETE", "/agents/prod/k~1", {}, {"x-tigris-consistent": "true"}, EMPTY_SHA256, None),
    ],
)
def test_the_same_signature_as_botocore(
    method: str, path: str, query: dict[str, str], extra: dict[str, str], payload: str, token: str | None
) -> None:
    keys = Keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    if payload == "sha":
        payload = "3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7"
    quoted, canonical = quote_path(path), canonical_query(query)
    ours = sign(keys, "eu-west-1", method, "127.0.0.1:7480", quoted, canonical, extra, payload, amz_date=AMZ_DATE)
    sent = {k: v for k, v in ours.items() if k not in ("authorization", "host")}
    url = f"http://127.0.0.1:7480{quoted}" + (f"?{canonical}" if canonical else "")
    theirs = botocore_signature(method, url, sent, keys, "eu-west-1")
    assert ours["authorization"].endswith(f"Signature={theirs}")
    if token:
        assert ours["x-amz-security-token"] == token and "x-amz-security-token" in ours["authorization"]


# -- 7. SigV4: header values are not canonicalised as the spec says -------------------------------


def test_header_values_with_inner_spaces_sign_like_botocore() -> None:
    """SigV4 canonical header values are trimmed AND have sequential spaces collapsed to one;
    ``sign`` only strips. A caller header like ``X-Amz-Meta-Note: "a  b"`` makes every request
    fail with 403 SignatureDoesNotMatch on the loop path while obstore/boto3 succeed (seen on
    RGW, integration_tests/test_loop_review_s3.py)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    keys = Keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    date = "20130524T000000Z"
    ours = sign(
        keys, "us-east-1", "GET", "example.com", "/b/k", "", {"x-amz-meta-note": "a  b"}, EMPTY_SHA256, amz_date=date
    )
    request = AWSRequest(
        method="GET",
        url="https://example.com/b/k",
        headers={"x-amz-meta-note": "a  b", "x-amz-date": date, "x-amz-content-sha256": EMPTY_SHA256},
    )
    request.context["timestamp"] = date
    auth = S3SigV4Auth(Credentials(keys.access_key, keys.secret_key), "s3", "us-east-1")
    canonical = auth.canonical_request(request)
    assert "x-amz-meta-note:a b\n" in canonical  # botocore collapses, as the spec says
    theirs = auth.signature(auth.string_to_sign(request, canonical), request)
    assert ours["authorization"].rsplit("Signature=", 1)[1] == theirs


def test_keys_never_show_their_secret_or_session_token() -> None:
    """Found in a security review: ``Keys``' dataclass ``repr`` printed the secret key and the
    session token, so any traceback, debug log or ``repr`` of an object holding them leaked
    them; botocore's and obstore's credentials do not. The access key id still shows: it names
    which credentials were used and grants nothing."""
    import logging

    secret, token = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "FwoGZXIvYXdzEJrSESSIONTOKEN"
    keys = Keys("AKIAIOSFODNN7EXAMPLE", secret, token)
    record = logging.LogRecord("x", logging.DEBUG, __file__, 1, "keys %s %r", (keys, keys), None)
    shown = [repr(keys), str(keys), f"{keys}", f"{[keys]}", record.getMessage(), repr({"k": keys})]
    for text in shown:
        assert "AKIAIOSFODNN7EXAMPLE" in text
        assert secret not in text and token not in text and "wJalr" not in text, text
    assert repr(keys) == "Keys(access_key='AKIAIOSFODNN7EXAMPLE', secret_key=<hidden>, token=<hidden>)"
    assert repr(Keys("AKID", secret)) == "Keys(access_key='AKID', secret_key=<hidden>, token=None)"
    assert (keys.secret_key, keys.token) == (secret, token)  # the fields themselves are intact
