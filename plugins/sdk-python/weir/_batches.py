"""Documents of a batch, read and written for the whole batch in few host calls.

In the batch-stage world a stage's documents keep their changes (`Document._pending`)
until the batch ends; `_flush_batch` sends them all at once, and `_read_ahead` reads
the fields `process` will read, for every document of the batch in one call. In the
lent-stage world the batch is lent as one handle whose documents are addressed by
position (`_Batch`), and no handle is made for a document (`_Unlent`) until a call
needs one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from componentize_py_types import Err
from wit_world.imports import document as wit

from ._values import _field_error

if TYPE_CHECKING:
    from ._document import Document

try:  # the batch-stage world's several-fields-in-one-call functions (new in 0.2.1)
    from wit_world.imports import fields as _fields
except ImportError:  # the connector and per-document stage worlds have none
    _fields = None

_MAX_CHANGES = 4096
"""The most changes the host takes in one `update` call (and for one document of `update-each`)."""

_MAX_EACH = 65536
"""The most answers one `get-json-each` gives (documents times names), and the most
changes one `update-each` makes in all."""

_MAX_DOCS = 4096
"""The most documents one `get-json-each` or `update-each` takes."""


class _Batch:
    """A batch lent by position (`lending.batch`, the lent-stage world) for one call:
    its documents' ids and the handles made on them, each asked of the host once."""

    __slots__ = ("batch", "size", "_ids", "handles")

    def __init__(self, batch: Any):
        self.batch = batch
        self.size = batch.size()
        self._ids: list[str] | None = None
        self.handles: dict[int, wit.Document] = {}

    def id(self, at: int) -> str:
        if self._ids is None:
            self._ids = self.batch.ids()
        return self._ids[at]

    def handle(self, at: int) -> wit.Document:
        handle = self.handles.get(at)
        if handle is None:
            handle = self.handles[at] = self.batch.document(at)
        return handle


class _Unlent:
    """Stands in for the handle of a document of a batch lent by position, until a
    call needs the handle itself: then it is asked of the host, once."""

    __slots__ = ("_batch", "_at")

    def __init__(self, batch: _Batch, at: int):
        self._batch = batch
        self._at = at

    def id(self) -> str:
        return self._batch.id(self._at)

    def __getattr__(self, name: str):
        return getattr(self._batch.handle(self._at), name)



def _read_ahead(docs: list[Document], names: list[str]) -> None:
    """Read the fields `names` of every one of `docs` in one host call (one per
    `_MAX_EACH` answers), for the reads to come."""
    batch = _batch_of(docs)
    if batch is not None and batch.size * len(names) <= _MAX_EACH:
        # Lent by position: the whole batch's in one call, kept for `docs` only
        # (the others may hold changes of their own).
        answers = json.loads(batch.batch.get_json(names))
        for doc in docs:
            doc._json.update(zip(names, answers[doc._handle._at]))
        return
    step = max(1, min(_MAX_DOCS, _MAX_EACH // len(names)))
    for at in range(0, len(docs), step):
        chunk = docs[at : at + step]
        # One string for the batch, parsed natively: fewer values cross than with
        # get-json-each's list of lists.
        answers = json.loads(_fields.get_json_each_text([doc._host() for doc in chunk], names))
        for doc, texts in zip(chunk, answers):
            doc._json.update(zip(names, texts))


def _flush_batch(docs: list[Document], outcomes: list) -> None:
    """Send the changes kept for each of `docs` to the host, in one call for the batch
    (one per `_MAX_DOCS` documents or `_MAX_EACH` changes). A document whose change the
    host refuses fails with that `weir.FieldError` in `outcomes` (unless it failed
    already), as the change itself would have failed it; the others are not affected."""
    waiting = [(at, doc) for at, doc in enumerate(docs) if doc._pending]
    if not waiting:
        return
    batch = _batch_of(docs)
    if batch is not None and len(docs) == batch.size and sum(len(doc._pending) for _, doc in waiting) <= _MAX_EACH:
        # Lent by position: the whole batch's changes in one call, failures answered by position.
        changes = [doc._pending for doc in docs]
        for _, doc in waiting:
            doc._pending = []
        for at, error in batch.batch.update(json.dumps(changes, ensure_ascii=False, separators=(",", ":"))):
            doc = docs[at]
            doc._json.clear()
            if not isinstance(outcomes[at], BaseException):
                outcomes[at] = _field_error(Err(error), f"document `{doc.id}`")
        return
    start = 0
    while start < len(waiting):
        end, total = start, 0
        while end < len(waiting) and end - start < _MAX_DOCS:
            total += len(waiting[end][1]._pending)
            if total > _MAX_EACH:
                break
            end += 1
        sent = waiting[start:end]
        handles = []
        changes = []
        for _, doc in sent:
            handles.append(doc._host())
            changes.append(doc._pending)
            doc._pending = []
        results = _fields.update_each_text(handles, json.dumps(changes, ensure_ascii=False, separators=(",", ":")))
        for (at, doc), result in zip(sent, results):
            if type(result) is Err:
                doc._json.clear()
                if not isinstance(outcomes[at], BaseException):
                    outcomes[at] = _field_error(result, f"document `{doc.id}`")
        start = end


def _batch_of(docs: list[Document]) -> _Batch | None:
    """The batch `docs` are lent from by position, if they are (all of one batch)."""
    first = docs[0]._handle if docs else None
    if type(first) is not _Unlent:
        return None
    batch = first._batch
    if all(type(doc._handle) is _Unlent and doc._handle._batch is batch for doc in docs):
        return batch
    return None
