"""Field values between Python and the host: Python values as JSON text and as WIT
`value`s and back, the first and every value of a field from its JSON text, names
checked to be strings before they reach the bindings, and the host's refusals as
`weir.FieldError`.

Used by `_document` (a document's fields) and `_batches` (a batch's fields).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable

from componentize_py_types import Err
from wit_world.imports import document as wit

from . import _codec
from ._errors import FieldError

_REASONS = {
    wit.FieldError_ReservedField: "reserved field",
    wit.FieldError_WrongType: "wrong type",
    wit.FieldError_InvalidPath: "invalid path",
    wit.FieldError_InvalidJson: "invalid JSON",
    wit.FieldError_TooLarge: "too large",
}

_S64 = range(-(2**63), 2**63)


def _string(value: Any, what: str) -> str:
    """`value`, which goes to the host as a string: anything else is refused here (the
    bindings would trap on it)."""
    if isinstance(value, str):
        return value
    raise TypeError(f"{what} must be a string, not {type(value).__name__}")


def _encode(value: Any, subject: str) -> str:
    try:
        return _codec.dumps(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{subject}: {error}") from None


def _encode_field(value: Any, name: str) -> str:
    """`value` as JSON text for field `name` (the message formatted only on failure)."""
    try:
        return _codec.dumps(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"field `{name}`: {error}") from None


def _first(text: str | None) -> Any:
    """The first value of a field whose JSON text is `text`."""
    if text is None:
        return None
    if text[:1] == '"' and "\\" not in text:  # a string without escapes: no parser needed
        return text[1:-1]
    value = _codec.loads(text)
    if type(value) is list:
        return value[0] if value else None
    return value


def _every(text: str | None) -> list:
    """Every value of a field whose JSON text is `text`."""
    if text is None:
        return []
    value = _codec.loads(text)
    return value if type(value) is list else [value]


def _names(names: Iterable[str]) -> list[str]:
    """`names` as a list of field names (a lone string is refused: it would read letters)."""
    if isinstance(names, str):
        raise TypeError("expected a list of field names, not a string")
    names = list(names)
    for name in names:
        _string(name, "a field name")
    return names


def _to_wit(value: Any, subject: str) -> wit.Value:
    """A Python value as a WIT `value` (lists, dicts, big integers and Decimals as JSON text)."""
    kind = type(value)
    if value is None:
        return wit.Value_Null()
    if kind is str and value.isascii():  # other text goes as JSON, checked to be valid Unicode
        return wit.Value_Text(value)
    if kind is bool:
        return wit.Value_Boolean(value)
    if kind is int and value in _S64:
        return wit.Value_Integer(value)
    if kind is float and value - value == 0:  # finite
        return wit.Value_Float(value)
    return wit.Value_Json(_encode(value, subject))


def _from_wit(value: wit.Value) -> Any:
    """A WIT `value` as a Python value."""
    kind = type(value)
    if kind is wit.Value_Null:
        return None
    if kind is wit.Value_Json:
        return _codec.loads(value.value)
    if kind is wit.Value_Number:
        text = value.value
        return Decimal(text) if any(c in text for c in ".eE") else int(text)
    return value.value


def _field_error(error: Err, subject: str) -> FieldError:
    """The exception for the host's refusal `error` of an operation on `subject`."""
    reason = error.value
    return FieldError(f"{subject}: {_REASONS[type(reason)]}: {reason.value}")

