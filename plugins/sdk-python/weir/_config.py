"""A plugin's settings, read with typed getters that record problems instead of raising.

`configure` reads every setting it knows. A getter returns the value or, when
the setting is missing or of the wrong type, records a problem naming it
(`fields[2].source`) and returns the default, or else a harmless stand-in ("",
0, 0.0, False, [], {}, None, an empty `Config`), so that `configure` runs to its
end and every problem is reported at once. Settings that `configure` never read
are problems too ("unknown setting"): usually typos.

The messages are those of the other Weir SDKs.
"""

from __future__ import annotations

import builtins
from decimal import Decimal
from typing import Any

from . import _codec

_REQUIRED: Any = object()


class _Kind:
    """What a getter (or an `of=` item) accepts."""

    def __init__(self, noun: str, accepts, stand_in):
        self.noun = noun
        self.accepts = accepts
        self.stand_in = stand_in


_KINDS = {
    str: _Kind("a string", lambda v: type(v) is str, lambda: ""),
    int: _Kind("an integer", lambda v: type(v) is int, lambda: 0),
    float: _Kind("a number", lambda v: type(v) in (int, float, Decimal), lambda: 0.0),
    bool: _Kind("true or false", lambda v: type(v) is bool, lambda: False),
    builtins.list: _Kind("a list", lambda v: type(v) is builtins.list, builtins.list),
    builtins.dict: _Kind("an object", lambda v: type(v) is builtins.dict, builtins.dict),
    object: _Kind("a value", lambda v: True, lambda: None),
}


class Config:
    """The settings of a plugin, or a nested object of them, as JSON values.

    Getters take the setting's name and an optional `default=`; without one the
    setting is required. `list` and `dict` take `of=`, the type of their items:
    `str`, `int`, `float`, `bool`, `list`, `dict`, `weir.Config` (nested objects,
    read and checked like this one) or `object` (any JSON value, the default).
    """

    def __init__(self, data: dict | None = None):
        """Settings from `data` (in a plugin's tests: `weir.Config({"field": "title"})`)."""
        self._data = {} if data is None else data
        self._path = ""
        self._problems: builtins.list[tuple[str, str]] = []
        # Every config to check for unknown keys: this one and those nested in it.
        self._all: builtins.list[Config] = [self]
        self._read: builtins.list[str] = []

    @classmethod
    def _parse(cls, text: str) -> Config:
        """The root config from the JSON text the host passes (empty: no settings)."""
        config = cls()
        if not text.strip():
            return config
        try:
            data = _codec.loads(text)
        except ValueError as error:
            config.problem("", f"the settings are not valid JSON: {error}")
            return config
        if type(data) is builtins.dict:
            config._data = data
        else:
            config.problem("", f"the settings must be a JSON object, got {_show(data)}")
        return config

    def string(self, key: str, default: Any = _REQUIRED, one_of: builtins.list[str] | None = None) -> str:
        """The text setting `key`; with `one_of`, it must be one of those."""
        value = self._get(key, str, default)
        if one_of is not None and self._holds(key, str) and value not in one_of:
            self.problem(key, f"expected one of {', '.join(one_of)}; got {_show(value)}")
        return value

    def integer(self, key: str, default: Any = _REQUIRED, min: int | None = None, max: int | None = None) -> int:
        """The integer setting `key`, optionally within `min`..`max`."""
        return self._ranged(key, int, default, min, max)

    def number(self, key: str, default: Any = _REQUIRED, min: float | None = None, max: float | None = None) -> float:
        """The number setting `key` (integer or fraction) as a float, optionally within `min`..`max`."""
        value = self._ranged(key, float, default, min, max)
        return float(value) if self._holds(key, float) else value

    def boolean(self, key: str, default: Any = _REQUIRED) -> bool:
        """The true/false setting `key`."""
        return self._get(key, bool, default)

    def value(self, key: str, default: Any = _REQUIRED) -> Any:
        """The setting `key`, whatever JSON value it is."""
        return self._get(key, object, default)

    def list(self, key: str, of: type = object, default: Any = _REQUIRED) -> builtins.list:
        """The list setting `key`, each item checked against `of` (problems at `key[2]`)."""
        items = self._get(key, builtins.list, default)
        if not self._holds(key, builtins.list):
            return items
        path = self._join(key)
        return [self._item(item, of, f"{path}[{position}]") for position, item in enumerate(items)]

    def dict(self, key: str, of: type = object, default: Any = _REQUIRED) -> builtins.dict:
        """The object setting `key` as a dict of any keys, each value checked against `of`."""
        items = self._get(key, builtins.dict, default)
        if not self._holds(key, builtins.dict):
            return items
        path = self._join(key)
        return {name: self._item(item, of, f"{path}.{name}") for name, item in items.items()}

    def object(self, key: str, default: Any = _REQUIRED) -> Config:
        """The nested settings `key`, read with these same getters (problems at `key.name`).

        `default` is a dict (often `{}`) read as if it were given. When the setting
        is missing or not an object, that one problem is reported and reads from
        the returned config report nothing.
        """
        data = self._get(key, builtins.dict, default)
        return self._nest(data if type(data) is builtins.dict else {}, self._join(key),
                          checked=self._holds(key, builtins.dict) or default is not _REQUIRED)

    def problem(self, key: str, message: str) -> None:
        """Report a problem of the plugin's own with setting `key` ("" for this object as a whole)."""
        self._problems.append((self._join(key) if key else self._path, str(message)))

    def problems(self) -> builtins.list[tuple[str, str]]:
        """Every problem recorded, then every setting no getter read, as `(path, message)`."""
        unknown = []
        for config in self._all:
            known = ", ".join(config._read)
            for key in config._data:
                if key not in config._read:
                    unknown.append((config._join(key), f"unknown setting (known here: {known})" if known else "unknown setting"))
        return self._problems + unknown

    def _get(self, key: str, kind: type, default: Any) -> Any:
        if key not in self._read:
            self._read.append(key)
        spec = _KINDS[kind]
        if key not in self._data:
            if default is _REQUIRED:
                self.problem(key, f"missing: {spec.noun} is required")
        elif not spec.accepts(self._data[key]):
            self.problem(key, f"expected {spec.noun}, got {_show(self._data[key])}")
        else:
            return self._data[key]
        return spec.stand_in() if default is _REQUIRED else default

    def _holds(self, key: str, kind: type) -> bool:
        """Whether `key` is set to a value of `kind`."""
        return key in self._data and _KINDS[kind].accepts(self._data[key])

    def _ranged(self, key: str, kind: type, default: Any, low: Any, high: Any) -> Any:
        value = self._get(key, kind, default)
        if self._holds(key, kind):
            if low is not None and value < low:
                self.problem(key, f"must be at least {low}, got {value}")
            if high is not None and value > high:
                self.problem(key, f"must be at most {high}, got {value}")
        return value

    def _item(self, item: Any, of: type, path: str) -> Any:
        spec = _KINDS[builtins.dict if of is Config else of]
        fits = spec.accepts(item)
        if not fits:
            self._problems.append((path, f"expected {spec.noun}, got {_show(item)}"))
        if of is Config:
            return self._nest(item if fits else {}, path, checked=fits)
        if of is float and fits:
            return float(item)
        return item if fits else spec.stand_in()

    def _nest(self, data: builtins.dict, path: str, checked: bool) -> Config:
        """A nested config at `path`; one standing in for a wrong value (`checked`
        False) reports nothing."""
        nested = Config(data)
        nested._path = path
        if checked:
            nested._problems = self._problems
            nested._all = self._all
            self._all.append(nested)
        return nested

    def _join(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key


def _show(value: Any) -> str:
    """`value` as short JSON text, for messages."""
    text = _codec.dumps(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
