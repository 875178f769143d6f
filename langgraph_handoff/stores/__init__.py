"""Object stores: one small protocol (get / put / delete / list, sync and async) and its adapters.

* :class:`MemoryStore`: linearizable, in-process; for tests.
* :class:`LocalStore`: a directory; the embedded default; CAS across processes on one host.
* :class:`ObstoreS3Store`: AWS S3 and S3-compatible servers through obstore (Rust), the low-CPU
  transport; the ``obstore`` extra. ``s3://`` URLs use it when it is installed.
* :class:`S3Store`: AWS S3 and S3-compatible servers through boto3.
* :class:`AzureBlobStore`: Azure Blob Storage through obstore (``az://`` URLs); the ``obstore`` extra.
* :class:`GCSStore`: Google Cloud Storage through google-cloud-storage (``gs://`` URLs); the ``gcs`` extra.
* :class:`CountingStore`: wraps any store and counts its requests.
"""

from langgraph_handoff.stores.base import ListPage, ObjectInfo, StoreBase, StoredObject
from langgraph_handoff.stores.counting import CountingStore
from langgraph_handoff.stores.gcs import GCSStore
from langgraph_handoff.stores.local import LocalStore
from langgraph_handoff.stores.memory import MemoryStore
from langgraph_handoff.stores.obstore_azure import AzureBlobStore
from langgraph_handoff.stores.obstore_s3 import ObstoreS3Store
from langgraph_handoff.stores.s3 import S3Store
from langgraph_handoff.stores.urls import store_from_url

__all__ = [
    "AzureBlobStore",
    "CountingStore",
    "GCSStore",
    "ListPage",
    "LocalStore",
    "MemoryStore",
    "ObjectInfo",
    "ObstoreS3Store",
    "S3Store",
    "StoreBase",
    "StoredObject",
    "store_from_url",
]
