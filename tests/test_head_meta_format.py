"""The typed head metadata writes the format the untyped ``Head.extra`` wrote.

``tests/fixtures/head_meta_heads.tar.gz`` holds heads written by the code before the typed record
(commit bb7934b; ``tests/fixtures/make_head_meta_heads.py`` says how), every metadata field by its
real owner plus heads with a newer release's keys, unreadable values and an unusual key order.
Each is decoded and encoded again by the current code, with the nonce it was stored with:

* the decoded structures are equal key by key, down to the type of every value (an ``int``
  stays an ``int``): old and new releases read each other's heads, no upgrade step needed;
* the bytes are identical whenever the stored metadata keys were in ``KEY_ORDER``, the order the
  writers of the dict left after a put. Heads whose keys were stored in another order (a sweep's
  tombstone of a leased thread, a lease taken after a TTL stamp, the crafted ones) come back with
  their keys in that order: the same structure, other bytes.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import msgpack
import pytest

from langgraph_handoff.format import envelope, records
from langgraph_handoff.format.head_meta import KEY_ORDER
from langgraph_handoff.stores import LocalStore

FIXTURE = Path(__file__).parent / "fixtures" / "head_meta_heads.tar.gz"
_RECORD_KEYS = {"t", "n", "r", "x", "s", "u"}


def _fixture(root: Path) -> dict[str, bytes]:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(root, filter="data")
    store = LocalStore(root)
    out = {}
    for info in store.list("heads/"):
        obj = store.get(info.key)
        assert obj is not None
        out[info.key] = obj.body
    return out


def _unpacked(data: bytes, key: str) -> dict[str, Any]:
    body = envelope.decode(data, key=key, expect=envelope.Kind.HEAD).body
    return msgpack.unpackb(body, raw=False, strict_map_key=False)  # type: ignore[no-any-return]


def _typed(value: Any) -> Any:
    """``value`` with the type of every scalar in it, so ``60`` and ``60.0`` differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _in_key_order(keys: list[str]) -> bool:
    known = [k for k in KEY_ORDER if k is not ...]
    lead, trail = known[:4], known[4:]
    ranks = [lead.index(k) if k in lead else 10 + trail.index(k) if k in trail else 5 for k in keys]
    return ranks == sorted(ranks)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    heads = _fixture(tmp_path_factory.mktemp("head-meta"))
    assert len(heads) == 21
    return heads


def test_heads_written_through_the_dict_come_back_the_same(
    stored: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    same_bytes, reordered = [], []
    for key, data in sorted(stored.items()):
        before = _unpacked(data, key)
        schema = envelope.decode(data, key=key).schema_version
        monkeypatch.setattr(records.secrets, "token_bytes", lambda n, nonce=before["u"]: nonce)
        again = records.encode_head(records.decode_head(data, key=key), schema_version=schema)
        after = _unpacked(again, key)
        assert _typed(after) == _typed(before), key
        meta_keys = [k for k in before if k not in _RECORD_KEYS]
        assert [k for k in after if k not in _RECORD_KEYS] == sorted(meta_keys, key=list(after).index)
        if _in_key_order(meta_keys):
            assert again == data, key
            same_bytes.append(key)
        else:
            assert again != data, key
            reordered.append(key)
    # both cases are exercised: most heads are byte for byte the same
    assert len(same_bytes) == 15 and sorted(reordered) == [
        "heads/half-read/=",
        "heads/newer/=",
        "heads/source/=",
        "heads/swept-leased/=",
        "heads/unordered/=",
        "heads/unreadable/=",
    ]
