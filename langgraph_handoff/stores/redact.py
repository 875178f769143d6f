"""URLs as error messages and log lines may show them: without what can be a secret.

A store URL, an endpoint or a request URL inside a client library's error can carry credentials:
user info (``s3://KEY:SECRET@bucket``, ``http://user:password@minio:9000``), an Azure SAS token in
the query (``?sv=...&sig=...``), or a secret pasted as a parameter's value. Messages repeat the
URL so the reader knows which store is meant, and they end up in terminals, CI logs and the
Agent Server's startup log. So every message that shows a URL shows :func:`redact_url` of it:
the scheme, the host and the path as they are; user info, each query value and the fragment as
``***``; the query's parameter names kept, since a mistyped name is what the reader must fix.

>>> redact_url("https://acct.blob.core.windows.net/agents?sv=2022-11-02&sig=c2VjcmV0")
'https://acct.blob.core.windows.net/agents?sv=***&sig=***'
>>> redact_url("s3://AKIDEXAMPLE:wJalrXUtnFEMI@agents/prod")
's3://***@agents/prod'

This module imports nothing of the package: every layer that shows a URL can use it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["redact_url", "redact_urls"]

#: what stands for a value that is not shown
HIDDEN = "***"

#: a URL inside free text (a client library's error): a scheme, ``://``, then up to a blank, a
#: quote, a parenthesis, a brace or a comma that ends it (square brackets stay: an IPv6 host)
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>(){},]+")


def redact_url(url: str) -> str:
    """``url`` without user info, query values or fragment (each ``***``).

    Parameter names stay; a parameter without ``=`` is hidden whole (it may be a token itself).
    A text that is not ``scheme://...`` is hidden whole: in ``KEY:SECRET@bucket`` or
    ``s3:KEY:SECRET@bucket`` nothing can be told apart from a secret.

    >>> redact_url("s3://agents/prod?endpoint_url=http://127.0.0.1:7480&region=eu-west-1")
    's3://agents/prod?endpoint_url=***&region=***'
    >>> redact_url("file:///var/lib/agents"), redact_url("memory://"), redact_url("s3:///prod")
    ('file:///var/lib/agents', 'memory://', 's3:///prod')
    >>> redact_url("s3:KEY:SECRET@bucket"), redact_url("KEY:SECRET@bucket"), redact_url("az://[x?sig=s")
    ('***', '***', 'az://***')
    >>> redact_url("https://h/p?token#frag"), redact_url("s3://KEY:SEC/RET@bucket/prefix")
    ('https://h/p?***#***', 's3://***@bucket/prefix')
    """
    scheme, _, rest = url.partition(":")
    if not rest.startswith("//") or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return HIDDEN
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: nothing after the scheme is shown
        return f"{scheme}://{HIDDEN}"
    where = parts.netloc + parts.path
    if "@" in where:  # user info; up to the last '@', since a secret may hold a '/' (KEY:SEC/RET@host)
        where = f"{HIDDEN}@{where.rpartition('@')[2]}"
    query = "&".join(_hidden_value(p) for p in parts.query.split("&") if p)
    # not urlunsplit: it drops the '//' of an empty host for schemes it does not know (s3:///p)
    return f"{scheme}://{where}" + (f"?{query}" if query else "") + (f"#{HIDDEN}" if parts.fragment else "")


def _hidden_value(parameter: str) -> str:
    name, equals, _ = parameter.partition("=")
    return f"{name}={HIDDEN}" if equals else HIDDEN  # a bare word may be a token itself


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted (:func:`redact_url`): for the messages of client
    libraries, which may name the request URL, query string and all (obstore's errors name it,
    and an Azure SAS token is part of it).

    >>> redact_urls("Error performing GET https://a.blob.core.windows.net/c/k?sig=abc%3D in 3ms: timed out")
    'Error performing GET https://a.blob.core.windows.net/c/k?sig=*** in 3ms: timed out'
    """
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
