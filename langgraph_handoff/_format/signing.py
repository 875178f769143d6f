"""Signed objects: with a key, write access to the bucket is no longer write access to the workers.

Whoever can write into a store can write an object with a valid checksum; the decoders refuse
anything the package does not write (:mod:`.records`), but a well-formed object of someone
else's is read like one of yours, and its values are built by your serializer. With a signing
key, every object the package writes carries a MAC over the key it is stored under, its header
and its body, and a reader refuses an object that no key it knows signed, before it decodes any
of it.

The signature follows the body of a format 4 envelope (:mod:`.envelope`), flagged in its
header (``FLAG_SIGNED``)::

    key id length   1 byte
    key id          1-32 bytes of [A-Za-z0-9._-]
    MAC             32 bytes: keyed BLAKE2b of (the store key, NUL, the header with the flag
                    set, the body, the key id), personalised "lgh-signed-v1"

The key id names the key, so keys rotate: a reader holds the key it signs with and any number
it only verifies with; an object signed with any of them reads. The store key is part of the
MAC, so a signed object copied under another key (another thread's head) is refused too.

What it does not stop: someone who can write into the store can still put back an older object
the package signed under the same key (a rollback), and delete objects.

>>> keys = SigningKeys.parse("k2:" + "a" * 43 + ",k1:" + "b" * 43)
>>> signed = sign(envelope.encode(envelope.Kind.BLOB, b"value"), keys.signing, "data/t/=/b/x")
>>> verify(signed, keys, "data/t/=/b/x") == signed
True
>>> envelope.decode(verify(signed, keys, "data/other/=/b/x"), key="data/other/=/b/x")  # moved: refused
Traceback (most recent call last):
...
langgraph_handoff.errors.CorruptObjectError: object 'data/other/=/b/x' is corrupt: its signature (key 'k2') does not match its bytes: altered, or moved from another key. ...
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from langgraph_handoff._format import envelope
from langgraph_handoff.errors import InvalidConfigError

__all__ = [
    "ENV_ACCEPT_UNSIGNED",
    "ENV_KEYS",
    "SigningKey",
    "SigningKeys",
    "is_signed",
    "required_by",
    "sign",
    "signer",
    "strip",
    "verify",
]

#: the keys of a process that takes them from its environment (the Agent Server, the command
#: line, ``from_url``): ``ID:SECRET[,ID:SECRET...]``, the first signs, every one verifies
ENV_KEYS = "LANGGRAPH_HANDOFF_SIGNING_KEYS"
#: ``true`` while a store is being signed (:attr:`SigningKeys.accept_unsigned`)
ENV_ACCEPT_UNSIGNED = "LANGGRAPH_HANDOFF_ACCEPT_UNSIGNED"

_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,32}$")
_MAC_SIZE = 32
_PERSON = b"lgh-signed-v1"
#: BLAKE2b takes keys of up to 64 bytes; shorter than 16 is no key
_SECRET_MIN, _SECRET_MAX = 16, 64


@dataclass(frozen=True)
class SigningKey:
    """One key: its id (stored in every object it signs) and its secret (16 to 64 bytes; 32 random
    bytes is the usual choice: ``python -c "import secrets; print(secrets.token_urlsafe(32))"``).
    The secret never appears in ``repr`` or in an error message."""

    key_id: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key_id, str) or not _KEY_ID.match(self.key_id):
            raise InvalidConfigError(f"signing key id {self.key_id!r}: use 1-32 characters of [A-Za-z0-9._-]")
        if not isinstance(self.secret, bytes) or not _SECRET_MIN <= len(self.secret) <= _SECRET_MAX:
            raise InvalidConfigError(
                f"signing key {self.key_id!r}: the secret must be {_SECRET_MIN} to {_SECRET_MAX} bytes "
                "(32 random bytes, e.g. secrets.token_urlsafe(32))"
            )


@dataclass(frozen=True)
class SigningKeys:
    """The keys of a process: ``signing`` signs every object it writes; every key of ``keys``
    (``signing`` first) verifies. With ``accept_unsigned``, an object that is not signed at all
    is read as it is (one signed with an unknown key, or whose signature does not match, never
    is): only while a store written before it had a key is being signed, and only until its
    format marker says a key is required (:mod:`langgraph_handoff.checkpoint.signed_store`).

    >>> keys = SigningKeys.parse("new:" + "n" * 32 + ",old:" + "o" * 32)
    >>> keys.signing.key_id, [k.key_id for k in keys.keys]
    ('new', ['new', 'old'])
    >>> keys
    SigningKeys(signing='new', verifying=['new', 'old'], accept_unsigned=False)
    """

    keys: tuple[SigningKey, ...]
    accept_unsigned: bool = False

    def __post_init__(self) -> None:
        if not self.keys:
            raise InvalidConfigError("SigningKeys needs at least one key (the first signs)")
        ids = [k.key_id for k in self.keys]
        if len(set(ids)) != len(ids):
            raise InvalidConfigError(f"signing key ids must be unique: {ids}")

    @property
    def signing(self) -> SigningKey:
        return self.keys[0]

    def get(self, key_id: str) -> SigningKey | None:
        return next((k for k in self.keys if k.key_id == key_id), None)

    def __repr__(self) -> str:
        ids = [k.key_id for k in self.keys]
        return f"SigningKeys(signing={ids[0]!r}, verifying={ids}, accept_unsigned={self.accept_unsigned})"

    @classmethod
    def of(cls, keys: SigningKeys | SigningKey | str | Iterable[SigningKey]) -> SigningKeys:
        """What ``signing_keys=`` takes: ``SigningKeys``, one ``SigningKey``, several (the first
        signs), or the text form :meth:`parse` reads."""
        if isinstance(keys, SigningKeys):
            return keys
        if isinstance(keys, SigningKey):
            return cls((keys,))
        if isinstance(keys, str):
            return cls.parse(keys)
        return cls(tuple(keys))

    @classmethod
    def parse(cls, text: str, *, accept_unsigned: bool = False) -> SigningKeys:
        """``ID:SECRET[,ID:SECRET...]``, each secret in base64 (URL-safe or standard, padding
        optional) of 16 to 64 bytes; the first key signs. The secrets are never repeated in an
        error."""
        keys = []
        for number, part in enumerate(p.strip() for p in text.split(",")):
            key_id, sep, secret = part.partition(":")
            if not sep or not key_id or not secret:
                raise InvalidConfigError(f"signing key {number + 1}: give ID:SECRET (the secret in base64)")
            keys.append(SigningKey(key_id, _b64(secret, key_id)))
        return cls(tuple(keys), accept_unsigned)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SigningKeys | None:
        """The keys in ``LANGGRAPH_HANDOFF_SIGNING_KEYS`` (None when it is unset or empty), with
        ``LANGGRAPH_HANDOFF_ACCEPT_UNSIGNED=true`` while a store is being signed."""
        env = os.environ if environ is None else environ
        text = env.get(ENV_KEYS, "").strip()
        if not text:
            return None
        accept = env.get(ENV_ACCEPT_UNSIGNED, "").strip().lower()
        if accept not in ("", "true", "false", "1", "0"):
            raise InvalidConfigError(f"{ENV_ACCEPT_UNSIGNED}={accept!r}: use true or false")
        try:
            return cls.parse(text, accept_unsigned=accept in ("true", "1"))
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"{ENV_KEYS}: {exc}") from None


def _b64(text: str, key_id: str) -> bytes:
    padded = text.strip() + "=" * (-len(text.strip()) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidConfigError(f"signing key {key_id!r}: the secret is not base64") from None


def _mac(secret: bytes, object_key: str, signed_part: bytes | bytearray, key_id: bytes) -> bytes:
    mac = hashlib.blake2b(key=secret, digest_size=_MAC_SIZE, person=_PERSON)
    mac.update(object_key.encode("utf-8"))
    mac.update(b"\0")
    mac.update(signed_part)
    mac.update(key_id)
    return mac.digest()


def is_signed(data: bytes) -> bool:
    """Whether ``data`` is an envelope of a format that can be signed, flagged as signed."""
    return (
        len(data) >= envelope.HEADER_SIZE
        and data[:4] == envelope.MAGIC
        and int.from_bytes(data[4:6], "big") >= 4
        and bool(data[7] & envelope.FLAG_SIGNED)
    )


def sign(data: bytes, key: SigningKey, object_key: str) -> bytes:
    """``data`` (an envelope of the current format, unsigned) signed with ``key`` for storage
    under ``object_key``. Anything else (not an envelope of ours: the probe's scratch bytes)
    is returned as it is."""
    if len(data) < envelope.HEADER_SIZE or data[:4] != envelope.MAGIC or int.from_bytes(data[4:6], "big") < 4:
        return data
    if data[7] & envelope.FLAG_SIGNED:
        data = _unsigned(data)
    flagged = bytearray(data)
    flagged[7] |= envelope.FLAG_SIGNED
    key_id = key.key_id.encode("ascii")
    mac = _mac(key.secret, object_key, flagged, key_id)
    flagged += bytes([len(key_id)]) + key_id + mac
    return bytes(flagged)


def _unsigned(data: bytes) -> bytes:
    """A signed envelope without its signature (what it was before :func:`sign`)."""
    length = int.from_bytes(data[12:16], "big")
    out = bytearray(data[: envelope.HEADER_SIZE + length])
    out[7] &= ~envelope.FLAG_SIGNED & 0xFF
    return bytes(out)


def strip(data: bytes) -> bytes:
    """``data`` without its signature when it has one (what the package wrote before signing):
    what readers above a signing store see, so that a body read back compares equal to the one
    a plan wrote."""
    return _unsigned(data) if _parse(data) is not None else data


def required_by(marker: object) -> bool:
    """Whether a store's format marker (decoded) records that its objects must be signed."""
    return isinstance(marker, dict) and marker.get("signing") == "required"


def signer(data: bytes) -> str | None:
    """The key id ``data`` says signed it (unchecked), or None."""
    parsed = _parse(data)
    return None if parsed is None else parsed[1].decode("ascii", "replace")


def _parse(data: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(the signed part, key id, MAC) of a signed envelope; None if it is not one, or its
    signature trailer is not whole."""
    if not is_signed(data):
        return None
    end = envelope.HEADER_SIZE + int.from_bytes(data[12:16], "big")
    if len(data) <= end:
        return None
    size = data[end]
    if len(data) != end + 1 + size + _MAC_SIZE or not 1 <= size <= 32:
        return None
    return data[:end], data[end + 1 : end + 1 + size], data[end + 1 + size :]


def verify(data: bytes, keys: SigningKeys, object_key: str, *, accept_unsigned: bool = False) -> bytes:
    """``data`` if a key of ``keys`` signed it for ``object_key``; else an envelope that stands
    for the refusal (:func:`~.envelope.refusal`): decoding it raises ``CorruptObjectError``
    (reason ``unsigned``) naming the key, so the refusal goes wherever damage goes, and nothing
    of the object is decoded. With ``accept_unsigned``, an object not signed at all is
    returned as it is. Bytes that are not an envelope of ours are returned as they are (the
    decoders refuse them as ``not_ours``; the probe reads its scratch bytes back)."""
    if len(data) < 6 or data[:4] != envelope.MAGIC:
        return data
    parsed = _parse(data)
    if parsed is None:
        if is_signed(data):
            return envelope.refusal("its signature is cut short or malformed")
        if accept_unsigned:
            return data
        return envelope.refusal(
            "it is not signed, and this store's readers have a signing key: it was not written by them"
        )
    signed_part, key_id, mac = parsed
    key = keys.get(key_id.decode("ascii", "replace"))
    if key is None:
        return envelope.refusal(
            f"it is signed with key {key_id.decode('ascii', 'replace')!r}, which this reader does not hold"
        )
    if not hmac.compare_digest(_mac(key.secret, object_key, signed_part, key_id), mac):
        return envelope.refusal(
            f"its signature (key {key.key_id!r}) does not match its bytes: altered, or moved from another key"
        )
    return data
