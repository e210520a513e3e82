"""The classes a stage or a connector subclasses (`Stage`, `Connector`), and the publisher.

The host makes one object of the plugin's class per instance, calls `configure`
with its settings, then the lifecycle methods; the object lives as long as the
instance, so state kept on `self` lasts from one call to the next.

`configure` is also called alone, on a throw-away object, to check the settings
before a run: it reads and checks settings and acquires nothing (files,
connections); acquire in `start` / `pre_execute`.
"""

from __future__ import annotations

from typing import Any, Iterable

from componentize_py_types import Err

from . import _batches, _document
from ._config import Config
from ._document import Document, _Revoked
from ._errors import PublishError
from ._values import _encode, _field_error, _string

# Documents `Publisher.publish_all` hands over in one host call.
_PACKED_CALL = 256


def _utf8_length(text: str) -> int:
    """Bytes of `text` in UTF-8, as the host counts them (ASCII without encoding it)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


class Stage:
    """Changes documents. Override `process` (one document at a time) or
    `process_batch` (a batch at a time).

    Either way the host lends documents a batch at a time, and one call into the
    component serves the batch: the default `process_batch` runs `process` on each
    document, reading the fields `process` read on the documents before for the whole
    batch in one host call. In the batch-stage world, the `set`, `update` and `remove`
    changes of the batch's documents go to the host in one call when the batch ends
    (a read sees them at once; a change the host refuses then, such as one that makes
    the document too large, fails its document).
    """

    def configure(self, config: Config) -> None:
        """Read the settings (the default takes none)."""

    def start(self) -> None:
        """Acquire what processing needs; called once per instance after `configure`."""

    def process(self, doc: Document) -> list[Document] | None:
        """Change `doc` in place; return new child documents to run through the rest of
        the pipeline ahead of `doc`, or None. `doc` is valid during this call only."""
        raise NotImplementedError

    def process_batch(self, docs: list[Document]) -> list | None:
        """Change each of `docs` in place (they are valid during this call only) and say
        what became of each: None when every one is done without children, else one
        outcome per document, in order: None (done), a list of new child documents
        (done, with children that run ahead of it), or an exception (it failed:
        `weir.Failure`, `weir.Transient`, `weir.Fatal` or any other). Raising fails
        every document of the batch with that error.

        The default runs `process` on each document in turn: an exception it raises
        fails that document only.
        """
        outcomes = []
        process = self.process
        reads = _document._reads = [] if _batches._fields is not None else None
        try:
            if _ahead and reads is not None:
                _batches._read_ahead(docs, _ahead)
            for at, doc in enumerate(docs):
                try:
                    outcomes.append(process(doc))
                except BaseException as error:  # this document's outcome, not the batch's
                    outcomes.append(error)
                if reads:
                    learned = _learn(reads)
                    if learned and at + 1 < len(docs):
                        _batches._read_ahead(docs[at + 1 :], learned)
        finally:
            _document._reads = None
        return outcomes

    def stop(self) -> None:
        """Release what `start` acquired."""


_MAX_AHEAD = 16
"""The most fields `Stage.process_batch` reads ahead per document."""

_ahead: list[str] = []
"""The fields `process` read from the host, read ahead for the documents after, in one
host call per batch."""


def _learn(reads: list[str]) -> list[str]:
    """Add the fields `process` just read from the host to those read ahead, and return
    those added (to read ahead for the rest of the batch); empty `reads`."""
    learned = []
    for name in reads:
        if len(_ahead) < _MAX_AHEAD and name not in _ahead:
            _ahead.append(name)
            learned.append(name)
    reads.clear()
    return learned


class Connector:
    """Reads a source and publishes documents. Override `execute`."""

    def configure(self, config: Config) -> None:
        """Read the settings (the default takes none)."""

    def pre_execute(self, run_id: str) -> None:
        """Prepare for the run `run_id` (open the source)."""

    def execute(self, publisher: Publisher) -> None:
        """Publish every document with `publisher.publish(doc)`."""
        raise NotImplementedError

    def post_execute(self) -> None:
        """Called when `execute` succeeded and every published document is done."""

    def close(self) -> None:
        """Release what `pre_execute` acquired; always called."""


class Publisher:
    """Hands a connector's documents to the host; lent for the duration of `execute`."""

    __slots__ = ("_handle",)

    def __init__(self, handle: Any):
        self._handle = handle

    def publish(self, doc: Document) -> None:
        """Send `doc` on (it is unusable after). Blocks while the pipeline is full.

        Raises `weir.PublishError` when the host refuses it (the run is stopping,
        or the document is too large): the connector should stop.
        """
        if not isinstance(doc, Document):
            raise TypeError(f"publish() takes a weir.Document, not {type(doc).__name__}")
        publish = self._handle.publish  # raises first when the publisher is no longer lent
        handle = doc._give("published")
        try:
            publish(handle)
        except Err as error:
            raise PublishError(error.value) from None

    def expect(self, documents: int) -> None:
        """Say that this `execute` will publish about `documents` documents in all, when
        the connector knows (contract 0.2.5, `progress`): `weir run`'s progress line shows
        the share published and the time left. Said again, the later number counts; only a
        guide, never an error.
        """
        from wit_world.imports import progress

        if isinstance(documents, bool) or not isinstance(documents, int) or documents < 0:
            raise ValueError(f"expect() takes a count of documents, not {documents!r}")
        progress.expect(self._lent(), min(documents, 2**64 - 1))

    def publish_all(self, documents: Iterable[tuple[str, dict]]) -> int:
        """Publish `documents`, `(id, fields)` pairs (as `weir.Document(id, fields)` takes
        them), in order, 256 to a host call (contract 0.2.3, `publish-packed`): one call
        for many documents costs about what one `publish` does. Blocks while the
        pipeline is full. Returns how many it published.

        Stops at the first document that is not one (raises `weir.FieldError` naming
        its id) or that the host refuses (raises `weir.PublishError`: stop then); the
        documents before it are published, as they are when `documents` itself raises. What follows a document's publish (its
        `sync.set`) goes after this call.
        """
        from wit_world.imports import publishing_packed as packed

        published = 0
        ids: list[str] = []
        text: list[str] = []
        lengths: list[int] = []

        def send() -> None:
            # The outbox is emptied first: whatever the host answers, nothing is sent twice.
            nonlocal published
            if not ids:
                return
            call = packed.PackedDocuments("".join(text), list(lengths))
            sent = list(ids)
            ids.clear()
            text.clear()
            lengths.clear()
            try:
                packed.publish_packed(self._lent(), call)
            except Err as error:
                refusal = error.value
                published += refusal.at
                reason = refusal.reason
                if isinstance(reason, packed.PackedReason_Invalid):
                    raise _field_error(Err(reason.value), f"document `{sent[refusal.at]}`") from None
                raise PublishError(reason.value) from None
            published += len(sent)

        try:
            for id, fields in documents:  # noqa: A001 (the document's id)
                _string(id, "a document id")
                if not isinstance(fields, dict):
                    raise TypeError(f"fields must be a dict, not {type(fields).__name__}")
                json = _encode(fields, f"document `{id}`")
                ids.append(id)
                text += (id, json)
                lengths += (_utf8_length(id), _utf8_length(json))
                if len(ids) >= _PACKED_CALL:
                    send()
        except BaseException:
            # What came before the failure is published, as one by one.
            send()
            raise
        send()
        return published

    def _lent(self) -> Any:
        """The host's publisher; raises `RuntimeError` once `execute` has returned."""
        handle = self._handle
        if isinstance(handle, _Revoked):
            raise RuntimeError(handle._message)
        return handle

    def _revoke(self) -> None:
        self._handle = _Revoked(
            "the publisher was lent for the duration of execute() only and cannot be used after it returned"
        )
