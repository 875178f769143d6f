"""The checkpoint saver: ``ObjectStoreSaver`` and the pieces it is built from."""

from langgraph_handoff.checkpoint.plans import Layout
from langgraph_handoff.checkpoint.saver import ObjectStoreSaver

__all__ = ["Layout", "ObjectStoreSaver"]
