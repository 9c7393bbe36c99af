"""A value a user typed for a push, read strictly as its kind's handler will read it.

A field the kind's type lacks, a key given twice, or a value of another JSON
type ("7" for a number) is refused rather than dropped or converted, since a
typo would otherwise push a job unlike the one meant; so is one its handler
could not use (a time with no zone, a whole number past what a database's
integers hold).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pydantic

from jobq.cli.text import quoted, shown
from jobq.errors import ValueDoesNotFit
from jobq.kind import Kind

__all__ = ["INT_MOST", "NotAValue", "read"]

INT_MOST = 2**63 - 1  # what the databases' BIGINTs hold: an ID past it names no row


class NotAValue(ValueError):
    """A value refused; its message is the line to show."""


def read(kind: Kind[Any], value: str) -> Any:
    """``value`` read strictly as a value of ``kind``; NotAValue saying what is wrong with it."""
    not_one = f"{shown(value)} is not a value of {kind.name}:"
    try:
        given = json.loads(value, object_pairs_hook=_no_key_twice)
    except _KeyTwice as e:
        raise NotAValue(f"{not_one} it has the key {quoted(str(e))} twice") from None
    except ValueError:
        given = None  # pydantic says where below, as it reads the same text
    try:
        decoded = pydantic.TypeAdapter(kind.codec.type).validate_json(value, strict=True)
        payload = kind.codec.encode(decoded)
        kind.codec.decode(payload)  # as the handler's attempt will: a value that fails it, now
    except pydantic.ValidationError as e:
        error = e.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise NotAValue(f"{not_one} {where + ': ' if where else ''}{error['msg']}") from None
    except ValueDoesNotFit as e:
        raise NotAValue(f"{not_one} {str(e).rpartition(' is not one: ')[2]}") from None
    unknown = _unknown_fields(given, json.loads(payload))
    if unknown:
        raise NotAValue(f"{not_one} it has no field {', '.join(unknown)}")
    unusable = _unusable(pydantic.TypeAdapter(kind.codec.type).dump_python(decoded))
    if unusable:
        raise NotAValue(f"{not_one} {unusable}")
    return decoded


class _KeyTwice(ValueError):
    """A JSON object that gives a key twice: json.loads would keep the last, silently."""


def _no_key_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(key)
            seen.add(key)
    return found


def _unusable(data: object, at: str = "") -> str:
    """What in ``data`` (a decoded value, as plain Python) would fail its job's every attempt:
    a datetime with no time zone (compared with an aware one), an integer past 64 bits (which
    no database column holds); "" for nothing."""
    where = f" at {at}" if at else ""
    if isinstance(data, datetime) and data.utcoffset() is None:
        return f"the time {data.isoformat()}{where} has no time zone: add one, such as Z or +02:00"
    if (
        isinstance(data, int)
        and not isinstance(data, bool)
        and not -INT_MOST - 1 <= data <= INT_MOST
    ):
        return (
            f"the whole number{where} is past what the database's integers hold: give "
            f"{-INT_MOST - 1} to {INT_MOST}"
        )
    items: Any = data.items() if isinstance(data, dict) else None
    if items is None and isinstance(data, list | tuple | set | frozenset):
        items = enumerate(data)
    for key, part in items or ():
        found = _unusable(part, f"{at}.{key}" if at else str(key))
        if found:
            return found
    return ""


def _unknown_fields(given: object, kept: object, at: str = "") -> list[str]:
    """The fields of the given JSON that the decoded value dropped: none, for a strict push."""
    if isinstance(given, dict) and isinstance(kept, dict):
        return [
            name
            for key, value in given.items()
            for name in (
                [f"{at}{key}"]
                if key not in kept
                else _unknown_fields(value, kept[key], f"{at}{key}.")
            )
        ]
    if isinstance(given, list) and isinstance(kept, list):
        return [
            name
            for i, (one, other) in enumerate(zip(given, kept, strict=False))
            for name in _unknown_fields(one, other, f"{at}{i}.")
        ]
    return []
