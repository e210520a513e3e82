"""`weir.Document`: a document that lives in the host, read and written as Python values.

Field values are Python values: None, bool, int (any size), float, str, list, dict
and `decimal.Decimal` (a number a float cannot hold exactly as written). A field
holding a list is multi-valued: `get` gives its first value, `get_all` every value.

This module holds the document itself (fields, paths, children, flow, the whole
document) and its loans; `_values` converts values and names the host's refusals,
and `_batches` reads and writes the fields of a whole batch at once.
"""

from __future__ import annotations

from typing import Any, Iterable

from componentize_py_types import Err
from wit_world.imports import document as wit

from . import _codec
from ._batches import _MAX_CHANGES, _Batch, _fields, _Unlent
from ._values import _encode, _encode_field, _every, _field_error, _first, _from_wit, _names, _string, _to_wit

_encode_string = _codec.encode_string

_MODES = {
    "overwrite": wit.UpdateMode.OVERWRITE,
    "append": wit.UpdateMode.APPEND,
    "skip": wit.UpdateMode.SKIP,
}

_RESERVED = frozenset(("id", "run_id", "_children"))
"""Names no field may have: a change to one goes to the host at once, which refuses it."""


class _Remove:
    """The type of `weir.REMOVE`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "weir.REMOVE"


REMOVE = _Remove()
"""As a value in `Document.update`: remove the field."""

_REMOVE = _fields.Change_Remove() if _fields is not None else None

_UNREAD = object()
"""In `Document._json`: the field was not read yet."""

_reads: list[str] | None = None
"""While a batch runs through `process`, the fields read from the host (not kept)."""


class _Revoked:
    """Stands in for a handle that is no longer ours: any use raises `RuntimeError(message)`."""

    __slots__ = ("_message",)

    def __init__(self, message: str):
        self._message = message

    def __getattr__(self, name: str):
        raise RuntimeError(self._message)


class Document:
    """A document: an id, a run id, named fields, nested children.

    `weir.Document(id, fields)` makes a new one (a connector publishes it, a stage
    returns it as a child). The document a stage's `process` receives is lent by
    the host for that call only.
    """

    __slots__ = ("_handle", "_id", "_owned", "_json", "_pending", "__weakref__")

    def __init__(self, id: str, fields: dict | None = None):
        """A new document with `id` and, optionally, `fields` (a dict of field values)."""
        _string(id, "a document id")
        if fields is None:
            handle = wit.Document(id)
        else:
            if not isinstance(fields, dict):
                raise TypeError(f"fields must be a dict, not {type(fields).__name__}")
            try:
                handle = wit.Document.from_json_with_id(id, _encode(fields, f"document `{id}`"))
            except Err as error:
                raise _field_error(error, f"document `{id}`") from None
        self._handle = handle
        self._id = id
        self._owned = True
        self._json = {}
        self._pending = None

    @classmethod
    def from_json(cls, text: str) -> Document:
        """A new document from whole-document JSON: `{"id": ..., fields..., "_children": [...]}`."""
        try:
            handle = wit.Document.from_json(_string(text, "document JSON"))
        except Err as error:
            raise _field_error(error, "document JSON") from None
        return cls._wrap(handle, owned=True)

    @classmethod
    def _wrap(cls, handle: wit.Document, owned: bool) -> Document:
        document = cls.__new__(cls)
        document._handle = handle
        document._id = None
        document._owned = owned
        document._json = {}
        document._pending = None
        return document

    @classmethod
    def _lend(cls, handles: list) -> list[Document]:
        """The documents of a batch lent by the host. In the batch-stage world their
        set and remove changes are kept (`_pending`) and sent for the whole batch in one
        host call when it ends (`_flush_batch`); other worlds send each at once."""
        docs = []
        pending = _fields is not None
        for handle in handles:
            document = cls.__new__(cls)
            document._handle = handle
            document._id = None
            document._owned = False
            document._json = {}
            document._pending = [] if pending else None
            docs.append(document)
        return docs

    @classmethod
    def _lend_batch(cls, batch: _Batch) -> list[Document]:
        """The documents of `batch`, lent by position: as `_lend`'s, with no handle
        made on any until a call needs it."""
        docs = []
        for at in range(batch.size):
            document = cls.__new__(cls)
            document._handle = _Unlent(batch, at)
            document._id = None
            document._owned = False
            document._json = {}
            document._pending = []
            docs.append(document)
        return docs

    def _host(self) -> wit.Document:
        """The handle itself, to pass to a host function (asked of the host for a
        document lent by position)."""
        handle = self._handle
        if type(handle) is _Unlent:
            return handle._batch.handle(handle._at)
        return handle

    def _flush(self) -> None:
        """Send the changes kept for this document to the host, in one call: before any
        host call that would not see them. A refused change raises `weir.FieldError`
        (with those before it made), as the change itself would have."""
        changes = self._pending
        if not changes:
            return
        self._pending = []
        made = [
            _fields.FieldChange(name, _REMOVE if text is None else _fields.Change_SetJson(text))
            for name, text in changes
        ]
        try:
            _fields.update(self._host(), made)
        except Err as error:
            self._json.clear()  # what the refused changes left out is not known here
            raise _field_error(error, f"document `{self.id}`") from None

    def _keep(self, name: str, text: str | None) -> None:
        """Keep the change of field `name` to JSON text `text` (None: removed) for the end
        of the batch; reads of the field see it now."""
        self._json[name] = text
        pending = self._pending
        pending.append((name, text))
        if len(pending) >= _MAX_CHANGES:
            self._flush()

    def _revoke(self, why: str) -> None:
        """Make every later use of this document raise: "document `<id>` <why>"."""
        if type(self._handle) is not _Revoked:
            self._handle = _Revoked(f"document `{self.id}` {why}")
            self._json = {}  # kept reads go too: every later use raises
            self._pending = None

    def _end_loan(self) -> None:
        """`process()`, which was lent this document, returns: later uses raise."""
        self._revoke(
            "was lent for the duration of process() only; keep what you need "
            "(doc.to_dict()) or make a new one with weir.Document(...)"
        )

    def _give(self, how: str) -> wit.Document:
        """Hand the document's handle to the host (`how`: "published", ...); the
        document is unusable after."""
        if type(self._handle) is _Revoked:
            raise RuntimeError(self._handle._message)
        if not self._owned:
            raise ValueError(
                f"document `{self.id}` is lent to process() and cannot be {how}: "
                "make a new one with weir.Document(...)"
            )
        handle = self._handle
        self._revoke(f"was {how} and belongs to the host now")
        return handle

    # Identity.

    @property
    def id(self) -> str:
        """The document's id."""
        if self._id is None:
            self._id = self._handle.id()
        return self._id

    @property
    def run_id(self) -> str | None:
        """The id of the run that published it, if any."""
        return self._handle.run_id()

    # Fields. A field's JSON text is asked of the host once and kept (`_json`) until
    # this document changes the field, so `has`, `is_multi_valued` and `get` of one
    # field cost one host call together. The lookup of a kept text is written out in
    # each reader: a Python call per read costs as much as the lookup.

    def _read(self, name: str) -> str | None:
        """The JSON text of field `name` (None when absent), from the host, kept."""
        text = self._handle.get_json(_string(name, "a field name"))
        self._json[name] = text
        if _reads is not None:
            _reads.append(name)
        return text

    def _text(self, name: str) -> str | None:
        """The JSON text of field `name` (None when absent), kept from an earlier read."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        return self._read(name) if text is _UNREAD else text

    def _read_ahead(self, names: list[str]) -> None:
        """Read the fields `names` in one host call, for the reads to come."""
        if len(names) == 1:
            self._json[names[0]] = self._handle.get_json(names[0])
        else:
            self._json.update(zip(names, _fields.get_json_many(self._host(), names)))

    def has(self, name: str) -> bool:
        """Whether field `name` is present (even if null)."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        if text is _UNREAD:
            text = self._read(name)
        return text is not None

    def field_names(self) -> list[str]:
        """The names of all fields, in insertion order."""
        if self._pending:
            self._flush()
        return self._handle.field_names()

    def is_multi_valued(self, name: str) -> bool:
        """Whether `name` holds a list of values (even of one)."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        if text is _UNREAD:
            text = self._read(name)
        return text is not None and text.startswith("[")

    def get(self, name: str) -> Any:
        """The first value of `name`, or None when absent (or empty)."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        if text is _UNREAD:
            text = self._read(name)
        return None if text is None else _first(text)

    def get_all(self, name: str) -> list:
        """Every value of `name`: a list for any field, [] when absent."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        if text is _UNREAD:
            text = self._read(name)
        return [] if text is None else _every(text)

    def get_string(self, name: str) -> str | None:
        """The first value of `name` as text, rendered by the host: strings as they are,
        numbers and booleans as in JSON (`true`), objects as JSON text. None when absent or null."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        if text is _UNREAD:
            text = self._read(name)
        if text is None:
            return None
        # Text, and what renders as the host renders it, from the kept JSON text; a
        # number or nested value is rendered by the host (numbers keep their digits).
        first = _first(text)
        if first is None or type(first) is str:
            return first
        if type(first) is bool:
            return "true" if first else "false"
        if self._pending:
            self._flush()
        return self._handle.get_string(name)

    def get_many(self, names: Iterable[str]) -> list:
        """`get` of each of `names`, in order, in one host call."""
        return [_first(text) for text in self._texts(names)]

    def get_all_many(self, names: Iterable[str]) -> list[list]:
        """`get_all` of each of `names`, in order, in one host call."""
        return [_every(text) for text in self._texts(names)]

    def get_strings_many(self, names: Iterable[str]) -> list[list[str]]:
        """Every value of each of `names` as text (as `get_string` renders one; nulls
        skipped), in order, in one host call."""
        if self._pending:
            self._flush()
        names = _names(names)
        if _fields is not None:
            return _fields.get_strings_many(self._host(), names)
        return [self._handle.get_strings(name) for name in names]

    def _texts(self, names: Iterable[str]) -> list[str | None]:
        """The JSON texts of `names`: those not kept, read in one host call."""
        names = _names(names)
        kept = self._json
        missing = [name for name in names if name not in kept]
        if len(missing) > 1 and _fields is not None:
            self._read_ahead(missing)
        return [self._text(name) for name in names]

    def set(self, name: str, value: Any) -> None:
        """Set `name` to `value` (a list makes the field multi-valued)."""
        if type(name) is not str:
            _string(name, "a field name")
        if type(value) is str and value.isascii():  # the common case, in one step
            text = _encode_string(value)
        else:
            text = _encode_field(value, name)
        if self._pending is not None and name not in _RESERVED:
            self._keep(name, text)
            return
        self._json.pop(name, None)
        try:
            self._handle.set_json(name, text)
        except Err as error:
            raise _field_error(error, f"field `{name}`") from None

    def set_all(self, name: str, values: Iterable) -> None:
        """Make `name` multi-valued with exactly `values` (even one, or none)."""
        self.set(name, list(values))

    def add(self, name: str, value: Any) -> None:
        """Append `value` to `name`, making it multi-valued (created if absent)."""
        if self._pending:
            self._flush()
        self._json.pop(name, None)
        try:
            self._handle.add(_string(name, "a field name"), _to_wit(value, f"field `{name}`"))
        except Err as error:
            raise _field_error(error, f"field `{name}`") from None

    def update(self, changes: dict) -> None:
        """Set several fields in one host call: `{name: value}` sets `name` as `set`
        does, `{name: weir.REMOVE}` removes it. Changes apply in order; the first one
        the host refuses raises `weir.FieldError`, with those before it applied (for a
        document of a batch, the changes go with the batch's: see `weir.Stage`)."""
        if not isinstance(changes, dict):
            raise TypeError(f"update() takes a dict of field changes, not {type(changes).__name__}")
        for name in changes:
            _string(name, "a field name")
        if self._pending is not None and _RESERVED.isdisjoint(changes):
            texts = [None if value is REMOVE else _encode_field(value, name) for name, value in changes.items()]
            for name, text in zip(changes, texts):
                self._keep(name, text)
            return
        if self._pending:
            self._flush()
        kept = self._json
        for name in changes:
            kept.pop(name, None)
        if _fields is None:
            for name, value in changes.items():
                if value is REMOVE:
                    self.remove(name)
                else:
                    self.set(name, value)
            return
        made = [
            _fields.FieldChange(name, _REMOVE if value is REMOVE else _fields.Change_SetJson(_encode_field(value, name)))
            for name, value in changes.items()
        ]
        try:
            for at in range(0, len(made), _MAX_CHANGES):
                _fields.update(self._host(), made[at : at + _MAX_CHANGES])
        except Err as error:
            raise _field_error(error, "update()") from None

    def remove(self, name: str) -> bool:
        """Remove `name`; True when it was present."""
        text = self._json.get(name, _UNREAD) if type(name) is str else _UNREAD
        if self._pending is not None and text is not _UNREAD and name not in _RESERVED:
            self._keep(name, None)  # whether it was present is known: no call
            return text is not None
        if self._pending:
            self._flush()
        self._json.pop(name, None)
        try:
            return self._handle.remove(_string(name, "a field name"))
        except Err as error:
            raise _field_error(error, f"field `{name}`") from None

    def rename(self, source: str, target: str, mode: str = "overwrite") -> bool:
        """Move `source`'s values to `target`; False when `source` is absent.

        `mode` says what happens when `target` exists: "overwrite" it, "append"
        to it, or "skip" (keep it and drop `source`).
        """
        if mode not in _MODES:
            raise ValueError(f"rename mode must be one of overwrite, append, skip, not {mode!r}")
        if self._pending:
            self._flush()
        self._json.clear()
        try:
            return self._handle.rename(_string(source, "a field name"), _string(target, "a field name"), _MODES[mode])
        except Err as error:
            raise _field_error(error, f"field `{source}` (renamed to `{target}`)") from None

    # Nested values by path, `a.b[2].c`.

    def get_path(self, path: str) -> Any:
        """The value at `path`, or None when any step is missing."""
        if self._pending:
            self._flush()
        try:
            value = self._handle.get_path(_string(path, "a path"))
        except Err as error:
            raise _field_error(error, f"path `{path}`") from None
        return None if value is None else _from_wit(value)

    def set_path(self, path: str, value: Any) -> None:
        """Set the value at `path`, creating objects (and growing lists) on the way."""
        if self._pending:
            self._flush()
        self._json.clear()
        try:
            self._handle.set_path(_string(path, "a path"), _to_wit(value, f"path `{path}`"))
        except Err as error:
            raise _field_error(error, f"path `{path}`") from None

    def remove_path(self, path: str) -> bool:
        """Remove the value at `path`; True when it was present."""
        if self._pending:
            self._flush()
        self._json.clear()
        try:
            return self._handle.remove_path(_string(path, "a path"))
        except Err as error:
            raise _field_error(error, f"path `{path}`") from None

    # Children nested inside the document (indexed as part of it).

    def add_child(self, child: Document) -> None:
        """Nest `child` (a new document) inside this one; `child` is unusable after."""
        if self._pending:
            self._flush()
        if not isinstance(child, Document):
            raise TypeError(f"add_child() takes a weir.Document, not {type(child).__name__}")
        child_id = child.id
        try:
            self._handle.add_child(child._give("nested with add_child()"))
        except Err as error:
            raise _field_error(error, f"child `{child_id}`") from None

    def children(self) -> list[Document]:
        """Copies of the nested children, in order."""
        return [Document._wrap(handle, owned=True) for handle in self._handle.children()]

    # Flow.

    def drop(self) -> None:
        """Drop the document: later stages are skipped and it is not indexed."""
        self._handle.set_dropped(True)

    def skip_stages(self) -> None:
        """Skip the remaining stages; the document is still indexed."""
        self._handle.set_skip_stages(True)

    # Whole document.

    def to_json(self) -> str:
        """The whole document as JSON text: `id`, `run_id`, fields, `_children`."""
        if self._pending:
            self._flush()
        return self._handle.to_json()

    def to_dict(self) -> dict:
        """The whole document as a dict (the `to_json` shape)."""
        if self._pending:
            self._flush()
        return _codec.loads(self._handle.to_json())

    def __repr__(self) -> str:
        if type(self._handle) is _Revoked:
            return f"<weir.Document (unusable) {self._handle._message}>"
        return f"<weir.Document {self.id!r}>"
