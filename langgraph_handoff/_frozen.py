"""Frozen dataclasses that are cheap to build: the saver makes thousands a second (records,
values, cache states, listed keys), and the ``__init__`` that ``dataclass(frozen=True)`` writes
sets each field through ``object.__setattr__``. Kept apart from the storage format so the stores
can use it too."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field  # noqa: F401 - the doctests use them
from typing import Any, TypeVar

__all__ = ["fast_init", "fast_replace"]

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Give a frozen dataclass an ``__init__`` that stores its fields in one step.

    The ``__init__`` that ``dataclass(frozen=True)`` writes sets each field through
    ``object.__setattr__``, several times slower than building a plain object; with thousands of
    records, values, writes and cache states built per second (every put, every decoded head),
    that was a visible share of the saver's CPU. This one has the same signature, defaults and
    default factories, and fills the instance ``__dict__`` at once. ``init=False`` fields with a
    default are left to the class attribute holding it. Only for classes without
    ``__post_init__``.

    A ``dataclass(slots=True)`` has no ``__dict__``: its ``__init__`` sets each field, the
    ``init=False`` ones to their defaults. Such a class costs a little more to build, and one
    object fewer per instance for every full collection to walk: the classes a long thread keeps
    by the thousand in its cached segments (``Record``, ``Folded``) are slotted (2026-12-04).

    >>> @fast_init
    ... @dataclass(frozen=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    ...     tags: list[str] = field(default_factory=list)
    >>> Point(1), Point(1, y=2) == Point(x=1, y=2, tags=[])
    (Point(x=1, y=0, tags=[]), True)
    """
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} has a __post_init__, which it would skip")
    scope: dict[str, Any] = {"_set": object.__setattr__, "_FACTORY": object()}
    slotted = _slotted(cls)
    params, items = [], []  # items: (field name, the expression of its value)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init:
            if f.default is dataclasses.MISSING:
                raise TypeError(f"fast_init: {cls.__name__}.{f.name} has no plain default")
            if slotted:  # no class attribute holds the default: set it
                scope[f"_default_{f.name}"] = f.default
                items.append((f.name, f"_default_{f.name}"))
            continue
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
            items.append((f.name, f.name))
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            items.append((f.name, f"_factory_{f.name}() if {f.name} is _FACTORY else {f.name}"))
        else:
            params.append(f.name)
            items.append((f.name, f.name))
    if slotted:  # each slot's own setter: a third of the time of ``object.__setattr__``
        scope.update(_slot_setters(cls))
        body = "".join(f"    _set_{name}(self, {value})\n" for name, value in items) or "    pass\n"
    else:
        body = f"    _set(self, '__dict__', {{{', '.join(f'{name!r}: {value}' for name, value in items)}}})\n"
    source = f"def __init__(self, {', '.join(params)}):\n{body}"
    exec(source, scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses `cls.__init__ = init`
    return cls


def fast_replace(obj: T, **changes: Any) -> T:
    """``dataclasses.replace`` for :func:`fast_init` classes, without its per-field loop.

    Like ``replace``, a field that is not set by ``__init__`` (the memos: ``_packed``,
    ``_approx_size``) goes back to its default on the copy, and an unknown name is a TypeError.

    >>> @fast_init
    ... @dataclass(frozen=True)
    ... class P:
    ...     x: int
    ...     y: int = 0
    ...     _memo: int | None = field(default=None, init=False)
    >>> p = P(1); object.__setattr__(p, "_memo", 5)
    >>> q = fast_replace(p, y=2)
    >>> q, q._memo
    (P(x=1, y=2, _memo=None), None)
    """
    cls = type(obj)
    try:
        init_names, memo_names, slotted = _FIELDS[cls]
    except KeyError:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        init_names = frozenset(f.name for f in fields if f.init)
        memo_names = tuple(f.name for f in fields if not f.init)
        slotted = _slotted_replace(cls, fields) if _slotted(cls) else None
        _FIELDS[cls] = (init_names, memo_names, slotted)
    if not init_names.issuperset(changes):
        raise TypeError(f"{cls.__name__} has no init field(s) {sorted(set(changes) - init_names)}")
    if slotted is not None:
        return slotted(obj, changes.get)  # type: ignore[no-any-return]
    state = {**obj.__dict__, **changes}
    for name in memo_names:
        state.pop(name, None)
    new = object.__new__(cls)
    object.__setattr__(new, "__dict__", state)
    return new


def _slotted(cls: type) -> bool:
    """True for a ``dataclass(slots=True)``: its instances have no ``__dict__`` to fill at once."""
    return cls.__dictoffset__ == 0


def _slot_setters(cls: type) -> dict[str, Any]:
    """``_set_{field}``: the setter of each slot's descriptor, which a frozen class's
    ``__setattr__`` does not stand in front of."""
    return {f"_set_{f.name}": _slot(cls, f.name).__set__ for f in dataclasses.fields(cls)}


def _slot(cls: type, name: str) -> Any:
    """The descriptor of slot ``name``: on ``cls`` or the slotted base that declares it."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"fast_init: {cls.__name__}.{name} has no slot")


def _slotted_replace(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., Any]:
    """:func:`fast_replace` for a slotted class, written out field by field: ``replace(obj,
    changes.get)`` copies each init field unless changed and resets each memo to its default."""
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls, **_slot_setters(cls)}
    lines = []
    for f in fields:
        if f.init:
            lines.append(f"    _set_{f.name}(new, changed({f.name!r}, obj.{f.name}))\n")
        elif f.default is dataclasses.MISSING:
            raise TypeError(f"fast_replace: {cls.__name__}.{f.name} has no plain default")
        else:
            scope[f"_default_{f.name}"] = f.default
            lines.append(f"    _set_{f.name}(new, _default_{f.name})\n")
    exec(f"def replace(obj, changed):\n    new = _new(_cls)\n{''.join(lines)}    return new\n", scope)
    return scope["replace"]  # type: ignore[no-any-return]


_FIELDS: dict[type, tuple[frozenset[str], tuple[str, ...], Callable[..., Any] | None]] = {}
