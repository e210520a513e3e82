"""Lossless JSON between the host and Python values.

Reading: integers of any size become `int`; a number with a fraction or an
exponent becomes `float` when the float's shortest rendering is the same decimal
number as written (the host's own rule), else `decimal.Decimal`, so nothing is
rounded on the way in.

Writing: `int` of any size and `decimal.Decimal` are written exactly, `float`
with its shortest round-trip digits laid out as the host lays out a float it
renders itself (`100.0`, `0.0001`, `1e-7`, `1e16`), so a value written by Python
reads the same as one written by the other SDKs; NaN and infinities are refused,
since JSON has no such numbers.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal

# Integers of any size stay exact (Python refuses to parse or print integers of
# more than 4300 digits unless told otherwise).
sys.set_int_max_str_digits(0)


def _parse_float(text: str) -> float | Decimal:
    number = float(text)
    if math.isfinite(number) and (repr(number) == text or Decimal(repr(number)) == Decimal(text)):
        return number
    return Decimal(text)


_decoder = json.JSONDecoder(parse_float=_parse_float)
_encode_string = json.encoder.encode_basestring
encode_string = _encode_string
"""A string as JSON text (it must be valid Unicode: see `checked_text`)."""


def loads(text: str):
    """Parse JSON text from the host into Python values, losing no digit."""
    # The most common field, a string without escapes, needs no parser.
    if text[:1] == '"' and "\\" not in text:
        return text[1:-1]
    return _decoder.decode(text)


def dumps(value) -> str:
    """Render `value` as compact JSON text, numbers exactly.

    Raises `TypeError` for a value JSON cannot hold and `ValueError` for NaN
    or an infinity.
    """
    if type(value) is str:  # the most common value, in one step
        return _encode_string(checked_text(value))
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def checked_text(text: str) -> str:
    """`text`, refused (`ValueError`) when it is not valid Unicode (a lone surrogate,
    e.g. from bytes decoded with `surrogateescape`): the host takes UTF-8 only."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"text is not valid Unicode ({error.reason}): {text!a}") from None
    return text


def safe_text(text: str) -> str:
    """`text` for a message to the host: anything that is not valid Unicode escaped."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def float_text(number: float) -> str:
    """`number` as JSON: Python's shortest round-trip digits, laid out like the
    host's (Rust's ryu) rendering: plain notation for decimal exponents from -5 to
    16 (`100.0`, `0.0001`), else `1e-7`, `1.5e300`."""
    mantissa, _, exponent = float.__repr__(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    sign = "-" if math.copysign(1.0, number) < 0 else ""
    if not digits:
        return f"{sign}0.0"
    significant = digits.rstrip("0")
    # number == significant * 10**scale; point == where the decimal point falls in it.
    scale = int(exponent or 0) - len(fraction) + len(digits) - len(significant)
    point = len(significant) + scale
    if scale >= 0 and point <= 16:
        return f"{sign}{significant}{'0' * scale}.0"
    if 0 < point <= 16:
        return f"{sign}{significant[:point]}.{significant[point:]}"
    if -5 < point <= 0:
        return f"{sign}0.{'0' * -point}{significant}"
    rest = f".{significant[1:]}" if len(significant) > 1 else ""
    return f"{sign}{significant[0]}{rest}e{point - 1}"


def _write(value, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(_encode_string(checked_text(value)))
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number (JSON has no NaN or infinity)")
        parts.append(float_text(value))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"Decimal('{value}') is not a JSON number (JSON has no NaN or infinity)")
        parts.append(str(value))
    elif isinstance(value, dict):
        parts.append("{")
        for position, (key, item) in enumerate(value.items()):
            if position:
                parts.append(",")
            parts.append(_encode_string(checked_text(_key(key))))
            parts.append(":")
            _write(item, parts)
        parts.append("}")
    elif isinstance(value, (list, tuple)):
        parts.append("[")
        for position, item in enumerate(value):
            if position:
                parts.append(",")
            _write(item, parts)
        parts.append("]")
    else:
        raise TypeError(
            f"a value of type {type(value).__name__} cannot be stored "
            "(use None, bool, int, float, decimal.Decimal, str, list or dict)"
        )


def _key(key) -> str:
    """An object key, converted as the `json` module converts it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return dumps(key)
    raise TypeError(f"object keys must be strings, not {type(key).__name__}")
