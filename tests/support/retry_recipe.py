"""The retry recipe of docs/checkpointer.md ("When two runs race"), sync and async, on graphs
whose state is a ``log`` of texts: one copy for every test that races runs through it, so each
checks the recipe the docs give. It never sends ``text`` again once it is in the conversation,
and sends it again whenever it is not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph_handoff import StaleWriterError

#: a test's hook on each refusal: the error, and whether the refused run was a resume
OnRefusal = Callable[[StaleWriterError, bool], None]


def send(graph: Any, text: str, config: Any, on_refusal: OnRefusal | None = None) -> Any:
    """Send ``text`` to the thread of ``config`` with the recipe; the thread's values at the end."""
    payload: Any = {"log": [text]}
    while True:
        try:
            return graph.invoke(payload, config, durability="sync")
        except StaleWriterError as exc:
            if on_refusal is not None:
                on_refusal(exc, payload is None)
            if exc.input_in_thread or payload is None:  # our text is in the conversation
                state = graph.get_state(config)
                if not state.next:  # and the other run answered it
                    return state.values
                payload = None  # answer what is pending, without sending it again
            # else our text is not in the conversation: send it again


async def asend(graph: Any, text: str, config: Any, on_refusal: OnRefusal | None = None) -> Any:
    """Async twin of :func:`send`."""
    payload: Any = {"log": [text]}
    while True:
        try:
            return await graph.ainvoke(payload, config, durability="sync")
        except StaleWriterError as exc:
            if on_refusal is not None:
                on_refusal(exc, payload is None)
            if exc.input_in_thread or payload is None:
                state = await graph.aget_state(config)
                if not state.next:
                    return state.values
                payload = None
