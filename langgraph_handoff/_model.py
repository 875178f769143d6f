"""Base class of the package's pydantic records (``Handoff``, ``Route``, ``RouteDecision``).

Pydantic reports bad data with its own ``ValidationError``; our API promises typed errors from
``langgraph_handoff.errors``. This base translates, once, for construction and for loading
stored data (``from_data``), so callers catch ``InvalidInputError`` subclasses everywhere.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError
from typing_extensions import Self

from langgraph_handoff.errors import InvalidInputError


class Model(BaseModel):
    #: the typed error raised for invalid data (each record names its own)
    invalid_error: ClassVar[type[InvalidInputError]] = InvalidInputError

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise self.invalid_error(f"invalid {type(self).__name__}: {exc}") from None

    @classmethod
    def from_data(cls, data: Any) -> Self:
        """Load a stored record (a dict from graph state, JSON, ...) with typed errors."""
        if isinstance(data, cls):
            return data
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise cls.invalid_error(f"invalid stored {cls.__name__}: {exc}") from None
