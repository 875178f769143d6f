"""The store probe against real servers: moto 4.2.14 (accepts If-None-Match and If-Match on PUT
and ignores them, measured) is refused by ``setup()`` and ``doctor`` on both S3 transports; Ceph
RGW passes, once, and passes ``doctor --race`` too. (moto 5 enforces the conditions one request
at a time, so it passes ``setup()``; only a race can catch it, and not every race does: see the
README's "Which stores work". It is not run here.)"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3, need_moto
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff._format import envelope, keys
from langgraph_handoff.cli import main
from langgraph_handoff.errors import UnsafeStoreError

TRANSPORTS = ["obstore", "boto3"]


def _moto_url(transport: str) -> str:
    endpoint = need_moto()  # moto takes any keys: the environment's RGW keys do
    return f"s3://lgh-probe/t-{uuid.uuid4().hex}?endpoint_url={endpoint}&transport={transport}"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_setup_refuses_moto(transport: str) -> None:
    url = _moto_url(transport)
    with ObjectStoreSaver.from_url(url, create_bucket=True) as saver:
        with pytest.raises(UnsafeStoreError, match="second create-only PUT") as err:
            saver.setup()
        assert "wrong If-Match" in str(err.value)
        with pytest.raises(UnsafeStoreError):
            await saver.asetup()
        assert list(saver.store.list("")) == []  # no marker written, scratch keys deleted


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_doctor_on_moto_and_rgw(transport: str, capsys: Any) -> None:
    _need_s3()
    rgw = f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex}?endpoint_url={S3_ENDPOINT}&transport={transport}"
    assert main(["doctor", rgw, "--json", "--rounds", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["trusted"] and report["problems"] == []
    assert (report["create_only"], report["compare_and_swap"], report["etag_quoting"]) == (
        "enforced",
        "enforced",
        "unquoted",
    )
    assert report["conditional_delete"] == {"obstore": "not offered", "boto3": "ignored"}[transport]  # RGW 16
    assert report["list_after_write"] == "yes"
    moto = _moto_url(transport)
    with ObjectStoreSaver.from_url(moto, create_bucket=True):
        pass
    assert main(["doctor", moto, "--json", "--rounds", "1"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["trusted"], report["create_only"], report["compare_and_swap"]) == (False, "ignored", "ignored")


def test_setup_on_rgw_probes_once_and_records_it() -> None:
    _need_s3()
    url = f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex}?endpoint_url={S3_ENDPOINT}"
    with ObjectStoreSaver.from_url(url) as saver:
        saver.setup()
        obj = saver.store.get(keys.FORMAT_MARKER_KEY)
        marker, _ = envelope.decode_msgpack(obj.body, key=obj.key, expect=envelope.Kind.MARKER)
        assert marker["probe"]["passed"] > 0
        assert [o.key for o in saver.store.list("")] == [keys.FORMAT_MARKER_KEY, "meta/index"]
        saver.setup()
        assert saver.store.get(keys.FORMAT_MARKER_KEY).etag == obj.etag  # not probed again


@pytest.mark.heavy
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_doctor_race_passes_rgw(transport: str, capsys: Any) -> None:
    """16 writers at once on the same ETag (and the same new key), 20 rounds of each: RGW never
    lets two win (its losers mostly get 500, read back as lost)."""
    _need_s3()
    rgw = f"s3://{S3_BUCKET}/t-{uuid.uuid4().hex}?endpoint_url={S3_ENDPOINT}&transport={transport}"
    assert main(["doctor", rgw, "--json", "--rounds", "1", "--race"]) == 0
    race = json.loads(capsys.readouterr().out)["race"]
    assert (race["writers"], race["rounds"], race["trusted"]) == (16, 20, True)
    for kind in ("compare_and_swap", "create_only"):
        assert (race[kind]["rounds"], race[kind]["double_wins"], race[kind]["most_winners"]) == (20, 0, 1), race[kind]
        assert race[kind]["errors"] == 0


async def test_the_async_race_on_the_loop_client_passes_rgw() -> None:
    from langgraph_handoff.probe import arace
    from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store

    _need_s3()
    store = ObstoreS3Store(S3_BUCKET, prefix=f"t-{uuid.uuid4().hex}", endpoint_url=S3_ENDPOINT, async_io="loop")
    try:
        report = await arace(store, writers=16, rounds=5)
    finally:
        await store.aclose()
    assert report.trusted, report.problems
    assert report.compare_and_swap.most_winners == report.create_only.most_winners == 1
    assert report.compare_and_swap.errors == report.create_only.errors == 0
