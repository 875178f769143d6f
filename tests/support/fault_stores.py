"""Which store a fault-campaign scenario runs on, as a value a worker process can receive.

The scenarios that race OS processes need to build the same store in each of them, on the
proxy's address or the server's own; a lambda cannot cross a process boundary, so the store is
named by a small frozen record instead, and :meth:`StoreSpec.__call__` builds it at a URL.
"""

from __future__ import annotations

from dataclasses import dataclass

from langgraph_handoff.stores import AzureBlobStore, ObstoreS3Store, S3Store, StoreBase

__all__ = ["STORES", "StoreSpec"]

#: every store and S3 transport the campaign covers
STORES = ("s3-boto3", "s3-obstore", "s3-loop", "azure", "gcs")


@dataclass(frozen=True)
class StoreSpec:
    """``kind`` (one of :data:`STORES`) under ``prefix``, on a server whose own address is
    ``upstream``; ``container`` is the bucket or container, ``account`` Azurite's account."""

    kind: str
    prefix: str
    upstream: str
    container: str = "lgh-tests"
    account: str = ""

    @property
    def use_async(self) -> bool:
        """The event-loop S3 client is driven through the saver's async API."""
        return self.kind == "s3-loop"

    def __call__(self, url: str) -> StoreBase:
        """The store at ``url`` (the proxy's, or :attr:`upstream`), always under :attr:`prefix`."""
        if self.kind == "s3-boto3":
            return S3Store(self.container, self.prefix, endpoint_url=url, create_bucket=True)
        if self.kind in ("s3-obstore", "s3-loop"):
            io = "loop" if self.kind == "s3-loop" else "threads"
            return ObstoreS3Store(self.container, self.prefix, endpoint_url=url, create_bucket=True, async_io=io)
        if self.kind == "azure":
            from langgraph_handoff.stores.obstore_azure import AZURITE_ACCOUNT, AZURITE_KEY

            return AzureBlobStore(
                self.container, self.prefix, account_name=AZURITE_ACCOUNT, account_key=AZURITE_KEY,
                endpoint_url=f"{url}/{self.account}", create_container=True,
            )  # fmt: skip
        if self.kind == "gcs":
            from langgraph_handoff.stores.gcs import GCSStore

            return GCSStore(self.container, self.prefix, endpoint_url=url, create_bucket=True)
        raise ValueError(f"unknown store kind {self.kind!r}: use one of {STORES}")
