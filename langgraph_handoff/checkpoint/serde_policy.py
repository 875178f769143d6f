"""Whether a serializer would run code that a stored object names, and how to stop it.

LangGraph's ``JsonPlusSerializer`` stores values of types it does not know natively as a msgpack
ext value naming a module, a type and its arguments, and by default, reading one, imports that
module and calls that type (with a warning for types it has not registered). For values your
own workers wrote that is how your types come back. For a value someone else wrote into the
bucket it is code execution in whichever process reads the thread: a worker, the Agent Server,
an operator's shell. ``LANGGRAPH_STRICT_MSGPACK=true``, or ``allowed_msgpack_modules``, limits
it to LangGraph's safe types and the ones you name; an ``EncryptedSerializer`` does not, as it
still reads values stored unencrypted.

``setup()`` logs what :func:`named_code_risk` says, and ``langgraph-handoff doctor`` prints it
for the serializer a process of its environment would build by default.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["HOW_TO_STOP", "named_code_risk"]

HOW_TO_STOP = (
    "set LANGGRAPH_STRICT_MSGPACK=true on every process that reads the store, or build the saver with "
    "serde=JsonPlusSerializer(allowed_msgpack_modules=[(module, name), ...]) naming your own types"
)


def named_code_risk(serde: Any) -> str | None:
    """A sentence saying how ``serde`` would run code a stored object names, or None when it
    builds only the types it was told to.

    >>> named_code_risk(JsonPlusSerializer(allowed_msgpack_modules=None)) is None
    True
    >>> print(named_code_risk(JsonPlusSerializer(allowed_msgpack_modules=True)))
    the serializer imports and calls any module and type a stored value names (LangGraph's permissive default)
    """
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if not isinstance(inner, JsonPlusSerializer):
        return None  # a serializer of your own: what it builds is yours to say
    risks = []
    if getattr(inner, "_allowed_msgpack_modules", None) is True:
        risks.append("imports and calls any module and type a stored value names (LangGraph's permissive default)")
    if getattr(inner, "pickle_fallback", False):
        risks.append("unpickles stored values (pickle_fallback=True)")
    if not risks:
        return None
    also = " (encryption does not stop it: unencrypted values are still read)" if inner is not serde else ""
    return "the serializer " + " and ".join(risks) + also
