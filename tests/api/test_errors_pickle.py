"""Every typed error survives a trip through ``pickle``: what a worker process raises reaches
the process that waits for it (``multiprocessing``, ``concurrent.futures``) as itself, with its
message and attributes. The typed errors take their fields as keyword arguments, which
``BaseException``'s own pickling cannot pass: 26 of them failed to unpickle with a ``TypeError``."""

from __future__ import annotations

import inspect
import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

import langgraph_handoff.errors as errors
from langgraph_handoff.errors import StaleWriterError
from tests.support.processes import process_context


def _samples() -> list[BaseException]:
    """One instance of each error class, its required parameters given text."""
    out = []
    for cls in vars(errors).values():
        if not (inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == errors.__name__):
            continue
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        args = ["x" for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        kwargs = {p.name: "x" for p in params if p.default is p.empty and p.kind is p.KEYWORD_ONLY}
        try:
            out.append(cls(*args, **kwargs))
        except (TypeError, ValueError, AttributeError):
            continue  # a field that must not be text; the classes around it cover the mechanism
    return out


SAMPLES = _samples()


def test_most_error_classes_are_sampled() -> None:
    assert len(SAMPLES) >= 40


@pytest.mark.parametrize("err", SAMPLES, ids=lambda e: type(e).__name__)
def test_an_error_unpickles_as_itself(err: BaseException) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err) and back.args == err.args
    assert vars(back) == vars(err)


def _refused() -> Any:
    raise StaleWriterError(
        "t", "", expected_parent="a", latest="b", checkpoint_id="c", committed=("i",), input_in_thread=False
    )


def test_a_refusal_raised_in_a_worker_process_reaches_the_caller_whole() -> None:
    with ProcessPoolExecutor(1, mp_context=process_context()) as pool, pytest.raises(StaleWriterError) as caught:
        pool.submit(_refused).result(timeout=60)
    assert caught.value.committed == ("i",) and caught.value.input_in_thread is False
    assert "send the same input again" in str(caught.value)
