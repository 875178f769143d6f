"""The store probe against real servers: moto 4.2.14 (accepts If-None-Match and If-Match on PUT
and ignores them, measured) is refused by ``setup()`` and ``doctor`` on both S3 transports; Ceph
RGW passes, once."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from conftest import S3_BUCKET, S3_ENDPOINT, _need_s3, need_moto
from langgraph_handoff import ObjectStoreSaver
from langgraph_handoff.cli import main
from langgraph_handoff.errors import UnsafeStoreError
from langgraph_handoff.format import envelope, keys

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
        assert [o.key for o in saver.store.list("")] == [keys.FORMAT_MARKER_KEY]
        saver.setup()
        assert saver.store.get(keys.FORMAT_MARKER_KEY).etag == obj.etag  # not probed again
