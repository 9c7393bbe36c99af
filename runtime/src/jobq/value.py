"""A kind's value: checked, encoded to JSON and decoded again through pydantic."""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Callable
from typing import Any, Generic, NoReturn, TypeVar

import pydantic
import pydantic_core

from jobq.errors import ConfigError, ValueDoesNotFit

__all__ = ["VALUE_LIMIT", "Codec", "return_type", "value_type"]

T = TypeVar("T")

# Bytes of JSON a job's value may be: a value is IDs and small records, and past
# this a database's packet limit (MariaDB's max_allowed_packet, 16 MiB by default)
# would refuse the push as a lost connection. docs/security.md lists it.
VALUE_LIMIT = 12 * 2**20


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


def return_type(kind: str, handler: Callable[..., object]) -> Any:
    """What the handler of ``kind``, a kind that keeps results, returns: its return annotation
    (of an ``async def``, what it returns once awaited)."""
    try:
        hints = typing.get_type_hints(handler)
    except Exception as e:
        raise ConfigError(f"kind {kind!r}: cannot resolve the handler's annotations ({e})") from e
    if "return" not in hints:
        raise ConfigError(
            f"kind {kind!r} keeps results: annotate what the handler returns, as in "
            "`async def handler(job: Invoice) -> Receipt`; its results are kept as that type"
        )
    return hints["return"]


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
            data = self._serializer.to_json(value)
            if len(data) <= VALUE_LIMIT:
                return data.decode()
            return self._too_large(data)
        try:
            # Nearly every push's way, in 0.3 µs where _checked takes 1.2
            # (pydantic-core reads the string warnings="error" in 0.9 of them),
            # several times that between a push's round trips.
            data = self._serializer.to_json(value, warnings=False)
            self._validator.validate_json(data, strict=True)
        except Exception:  # whatever went wrong, _checked decides, and says why
            data = self._checked(value)
        if len(data) > VALUE_LIMIT:
            self._too_large(data)
        return data.decode()

    def _too_large(self, data: bytes) -> NoReturn:
        raise ValueDoesNotFit(
            f"kind {self.kind!r}: the value is {len(data)} bytes of JSON, over the limit of "
            f"{VALUE_LIMIT} ({VALUE_LIMIT // 2**20} MiB): keep IDs in a job's value, and "
            f"the records they name in the app's tables"
        )

    def _checked(self, value: T) -> bytes:
        """``value``'s JSON, each part of it checked against the type as it is written."""
        try:
            data = self._serializer.to_json(value, warnings="error")
            # What cannot come back (NaN kept as null, say) fails the push, not the job.
            self._validator.validate_json(data)
        except (pydantic.ValidationError, pydantic_core.PydanticSerializationError, TypeError) as e:
            said = _one_line(e)
            try:
                at = _not_finite(self._adapter.dump_python(value, warnings=False))
            except Exception:  # a value pydantic cannot even walk: its first error says why
                at = None
            if at is not None:  # pydantic writes NaN and infinity as null, which reads back wrong
                said = (
                    f"{at[1]!r}{' at ' + at[0] if at[0] else ''} has no JSON: give a finite number"
                )
            raise ValueDoesNotFit(
                f"kind {self.kind!r} takes {_name(self.type)}, and {_short(value)} is not one: "
                f"{said}"
            ) from None  # its message says it all: not a chain into pydantic
        return data

    def decode(self, payload: str) -> T:
        """The value from its JSON; pydantic's ValidationError when it does not fit."""
        return self._validator.validate_json(payload)  # type: ignore[no-any-return]


# What pydantic's serializer warns of a part that is not its type, raised as an error:
# "Pydantic serializer warnings: PydanticSerializationUnexpectedValue(Expected `str` -
# serialized value may not be as expected [field_name='to', input_value=3, input_type=int])".
_UNEXPECTED = re.compile(
    r"Expected `(?P<expected>[^`]+)`.*?\[(?:field_name='(?P<field>[^']*)', )?"
    r"input_value=.*, input_type=(?P<got>[^\]]+)\]",
    re.DOTALL,
)


def _one_line(error: Exception) -> str:
    """A validation error's first problem, or another error's message, as one line: for
    a part the serializer did not expect, where it is and its type, not pydantic's words."""
    if isinstance(error, pydantic.ValidationError):
        problems = error.errors(include_url=False, include_input=False)
        if problems:
            first = problems[0]
            at = ".".join(str(part) for part in first["loc"])
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            return f"{at + ': ' if at else ''}{first['msg']}{more}"
    unexpected = _UNEXPECTED.search(str(error))
    if unexpected is not None:
        field, expected, got = unexpected.group("field", "expected", "got")
        return f"{field + ': ' if field else ''}expected {expected}, not {got}"
    return " ".join(str(error).split())


def _not_finite(data: object, at: str = "") -> tuple[str, float] | None:
    """Where a float in ``data`` (a value as plain Python) is NaN or infinite, and that float."""
    if isinstance(data, float) and not math.isfinite(data):
        return at, data
    items: Any = data.items() if isinstance(data, dict) else None
    if items is None and isinstance(data, list | tuple | set | frozenset):
        items = enumerate(data)
    for key, part in items or ():
        found = _not_finite(part, f"{at}.{key}" if at else str(key))
        if found is not None:
            return found
    return None


def _short(value: object, most: int = 200) -> str:
    """``value``'s repr, cut to ``most`` characters: a message names a large value."""
    shown = repr(value)
    return shown if len(shown) <= most else f"{shown[: most - 5]}...{shown[-2:]}"


def _name(type_: Any) -> str:
    return getattr(type_, "__qualname__", None) or repr(type_)
