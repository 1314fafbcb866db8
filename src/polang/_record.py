"""Record classes without ``@dataclass`` code generation at import (start-up time).

``@dataclass`` writes each class's ``__init__``, ``__eq__``, ``__hash__``, ``__repr__``
and frozen ``__setattr__`` as source text and compiles it when the module is imported:
about 0.65 ms a class on CPython 3.11, and a first decision imported about ninety of
them (``benchmarks/README.md``, ``bench_coldstart.py``). A :class:`Record` subclass
declares its fields as annotations (constructor order), names them in ``__slots__`` and
writes its own ``__init__`` (compiled once into the bytecode cache like any method);
equality, hashing, ``repr``, immutability, :func:`replace` and pickling come from here,
driven by the field names.

- Frozen by default: assigning or deleting a field raises
  ``dataclasses.FrozenInstanceError``, as a frozen dataclass does; ``__init__`` sets the
  fields with ``object.__setattr__``. A class with ``_frozen = False`` is mutable and
  unhashable (a dataclass with ``eq=True``).
- Equality and the hash use the fields in order except those named in
  ``_uncompared`` (source spans: two parses of the same text are equal wherever they
  came from); objects of different classes are never equal.
- ``repr`` shows the fields not named in ``_unshown``, as a dataclass's does.
- A slot whose name starts with ``_`` is not a field (a cache, say): not compared, shown,
  copied by :func:`replace` or pickled. ``ClassVar`` annotations are not fields either.
- A field named in ``_computed`` needs no slot: the class makes it a property (over a
  private slot) after its body, e.g. a value built only when first read.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, ClassVar, TypeVar

_set = object.__setattr__


class Record:
    """Base of the record classes: see the module docstring."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    """Every field, constructor order (the annotations of the class and its record bases)."""
    _uncompared: ClassVar[tuple[str, ...]] = ()
    _unshown: ClassVar[tuple[str, ...]] = ()
    _key: ClassVar[attrgetter[Any]] = attrgetter("__class__")
    _shown: ClassVar[tuple[str, ...]] = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()

    _frozen: ClassVar[bool] = True
    _computed: ClassVar[tuple[str, ...]] = ()
    """Fields read through a property rather than a slot of their own (see above)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the class's own annotations, in order (inspect.get_annotations would import
        # inspect: 7 ms of start-up)
        own = [
            name
            for name, ann in cls.__dict__.get("__annotations__", {}).items()  # noqa: RUF063
            if not name.startswith("_") and not str(ann).startswith("ClassVar")
        ]
        slots = cls.__dict__.get("__slots__", ())
        missing = set(own) - {slots} if isinstance(slots, str) else set(own) - set(slots)
        missing -= set(cls._computed)
        if missing:
            raise TypeError(f"{cls.__qualname__}: fields {sorted(missing)} not in __slots__")
        fields = (*cls._fields, *own)
        cls._fields = fields
        setattr(cls, "__match_args__", fields)  # noqa: B010 (mypy: a read-only name)
        compared = [f for f in fields if f not in cls._uncompared]
        if compared:
            cls._key = attrgetter(*compared)
        cls._shown = tuple(f for f in fields if f not in cls._unshown)
        if not cls._frozen:
            cls.__setattr__ = object.__setattr__  # type: ignore[method-assign,assignment]
            cls.__delattr__ = object.__delattr__  # type: ignore[method-assign]
            cls.__hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(self._key(self) == self._key(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._shown)
        return f"{type(self).__qualname__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), tuple(getattr(self, f) for f in self._fields)


R = TypeVar("R", bound=Record)  # a class, not a string: typing would compile a string (1 ms)


def replace(obj: R, /, **changes: Any) -> R:
    """A copy of ``obj`` with some fields changed (``dataclasses.replace`` for records)."""
    unknown = changes.keys() - set(obj._fields)
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {sorted(unknown)[0]!r}")
    return type(obj)(**{f: changes[f] if f in changes else getattr(obj, f) for f in obj._fields})


def fields(obj: Record | type[Record]) -> tuple[str, ...]:
    """The field names of a record (class or instance), constructor order."""
    return obj._fields
