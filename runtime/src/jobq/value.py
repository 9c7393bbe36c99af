"""A kind's value: checked, encoded to JSON and decoded again through pydantic."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import pydantic
import pydantic_core

from jobq.errors import ConfigError, ValueDoesNotFit

__all__ = ["Codec", "value_type"]

T = TypeVar("T")


def value_type(kind: str, handler: Callable[..., object]) -> Any:
    """The type of the handler's first parameter: what a job of ``kind`` carries."""
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError) as e:
        raise ConfigError(f"kind {kind!r}: cannot read the handler's parameters ({e})") from e
    if not params or params[0].kind not in (
        params[0].POSITIONAL_ONLY,
        params[0].POSITIONAL_OR_KEYWORD,
    ):
        raise ConfigError(
            f"kind {kind!r}: the handler takes the job's value as its first parameter, "
            "as in `async def handler(job: WelcomeMail) -> None`"
        )
    try:
        hints = typing.get_type_hints(handler)
    except Exception as e:  # a forward reference that does not resolve, typically
        raise ConfigError(f"kind {kind!r}: cannot resolve the handler's annotations ({e})") from e
    annotation = hints.get(params[0].name, inspect.Parameter.empty)
    if annotation is inspect.Parameter.empty:
        raise ConfigError(
            f"kind {kind!r}: annotate the handler's first parameter with the job's type "
            "(a dataclass, TypedDict, pydantic model or plain type)"
        )
    return annotation


class Codec(Generic[T]):
    """Encodes a kind's values as JSON and decodes them, checking each against the type."""

    def __init__(self, kind: str, type_: Any) -> None:
        self.kind = kind
        self.type = type_
        try:
            self._adapter: pydantic.TypeAdapter[T] = pydantic.TypeAdapter(type_)
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as e:
            raise ConfigError(f"kind {kind!r}: {type_!r} cannot be kept as JSON ({e})") from e
        self._serializer = self._adapter.serializer
        self._validator = self._adapter.validator
        # An int's JSON or a str's always reads back strictly as one: a value of
        # exactly that type needs no reading back (the most common kinds' values).
        self._exact: type | None = type_ if type_ in (int, str) else None

    def encode(self, value: T) -> str:
        """The value's JSON, or ValueDoesNotFit when it is not one the kind takes.

        It fits when its JSON reads back as the kind's type in strict mode (so
        a job never fails for its value at run time), or, failing that, when it
        serializes as the type without a warning and reads back as it.
        """
        if type(value) is self._exact:
            return self._serializer.to_json(value).decode()
        try:
            # Nearly every push's way, in 0.3 µs where _checked takes 1.2
            # (pydantic-core reads the string warnings="error" in 0.9 of them),
            # several times that between a push's round trips.
            data = self._serializer.to_json(value, warnings=False)
            self._validator.validate_json(data, strict=True)
        except Exception:  # whatever went wrong, _checked decides, and says why
            data = self._checked(value)
        return data.decode()

    def _checked(self, value: T) -> bytes:
        """``value``'s JSON, each part of it checked against the type as it is written."""
        try:
            data = self._serializer.to_json(value, warnings="error")
            # What cannot come back (NaN kept as null, say) fails the push, not the job.
            self._validator.validate_json(data)
        except (pydantic.ValidationError, pydantic_core.PydanticSerializationError, TypeError) as e:
            raise ValueDoesNotFit(
                f"kind {self.kind!r} takes {_name(self.type)}, and {value!r} is not one: {e}"
            ) from e
        return data

    def decode(self, payload: str) -> T:
        """The value from its JSON; pydantic's ValidationError when it does not fit."""
        return self._validator.validate_json(payload)  # type: ignore[no-any-return]


def _name(type_: Any) -> str:
    return getattr(type_, "__qualname__", None) or repr(type_)
