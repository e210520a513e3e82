"""Messages from sources that never end (contract 0.2.2, world `streaming-connector`).

A Kafka topic, a message queue or documents pushed to `weir serve`, as the connector's
config grants them (`grants.kafka`, `grants.queues`, `grants.push`). The host holds the
client; the connector names the grant, turns each message into documents and says when
it is done with it. The host acknowledges a message (or commits its offset) only once
every document published for it is done: indexed, dropped, or failed and dead-lettered.
Build the connector with `build.sh streaming-connector`. Its `execute` loops until the
run stops:

    import json
    import weir
    from weir import messages

    class Orders(weir.Connector):
        def execute(self, publisher):
            while (batch := messages.receive("orders", 512, 1000)) is not None:
                for message in batch:
                    try:
                        fields = json.loads(message.body)
                    except ValueError as error:
                        messages.reject(message, f"not JSON: {error}")
                        continue
                    messages.publish(publisher, message, weir.Document(fields["id"], fields))
                    messages.finish(message)

`consume(publisher, source, becomes)` is that loop: `becomes(message)` returns a
`weir.Document`, `messages.Delete(id)` (a tombstone or a delete event), or None (done
with no document); an exception rejects the message with its text.

A message has `handle`, `origin` (`topic/partition/offset`, or the queue), `key` (bytes
or None), `body` (bytes), `headers` (a list of `(name, bytes)`), `timestamp_ms` and
`attempt` (1, or the broker's delivery count).

Only connectors built for `streaming-connector` have this module (`weir.messages`).
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, NamedTuple

from componentize_py_types import Err
from wit_world.imports import messages as _host

from ._document import Document
from ._errors import Fatal, PublishError
from ._plugins import Publisher

__all__ = ["Delete", "MAX_RECEIVE", "consume", "delete", "finish", "header", "publish", "receive", "reject", "text"]

MAX_RECEIVE = 4096
"""Most messages one `receive` answers."""


class Delete(NamedTuple):
    """What `consume`'s `becomes` returns for a message that deletes document `id`."""

    id: str


def receive(source: str, max: int, wait_ms: int) -> list[Any] | None:  # noqa: A002 (the contract's name)
    """Up to `max` messages (1 to `MAX_RECEIVE`) from granted source `source`, waiting at
    most `wait_ms` for the first: None once the run is stopping (return from `execute`),
    an empty list when none came in time. A source that failed raises `weir.Fatal`."""
    try:
        wanted = builtins.min(builtins.max(1, int(max)), MAX_RECEIVE)
        return _host.receive(_str(source, "source"), wanted, int(wait_ms))
    except Err as error:
        if isinstance(error.value, _host.ReceiveError_Stopping):
            return None
        raise Fatal(error.value.value) from None


def publish(publisher: Publisher, message: Any, doc: Document) -> None:
    """Publish `doc` as one of the documents of `message` (unusable after). Raises
    `weir.PublishError` when the host refuses it (the run stopping, an unknown handle)."""
    if not isinstance(doc, Document):
        raise TypeError(f"publish() takes a weir.Document, not {type(doc).__name__}")
    handle = _publisher(publisher)
    given = doc._give("published")
    try:
        _host.publish(handle, message.handle, given)
    except Err as error:
        raise PublishError(error.value) from None


def delete(publisher: Publisher, message: Any, id: str) -> None:  # noqa: A002 (the contract's name)
    """Publish a deletion marker for document `id` as one of the documents of `message`:
    the indexer deletes the document, and the message is done once it has. Raises
    `weir.PublishError` when the host refuses it."""
    handle = _publisher(publisher)
    try:
        _host.delete(handle, message.handle, _str(id, "id"))
    except Err as error:
        raise PublishError(error.value) from None


def finish(message: Any) -> None:
    """Every document of `message` is published: the host acknowledges it once they are
    done (at once when there were none)."""
    _host.finish(message.handle)


def reject(message: Any, reason: str) -> None:
    """`message` is not a valid document: dead-lettered now with `reason`, its origin and
    its attempt, never retried."""
    _host.reject(message.handle, str(reason))


def text(message: Any) -> str | None:
    """The message's body as UTF-8 text, or None when it is not."""
    try:
        return bytes(message.body).decode("utf-8")
    except UnicodeDecodeError:
        return None


def header(message: Any, name: str) -> str | None:
    """The message's header `name` (the first of that name) as UTF-8 text, if any."""
    for key, value in message.headers:
        if key == name:
            try:
                return bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return None
    return None


def consume(
    publisher: Publisher,
    source: str,
    becomes: Callable[[Any], Document | Delete | None],
    batch: int = 512,
    wait_ms: int = 1000,
    limit: int | None = None,
) -> None:
    """The usual loop: receive batches of at most `batch` from `source`, at most `limit`
    messages in all (None: until the run stops); for each, publish what `becomes` makes
    of it (a document, a `Delete`, or None for nothing) and finish it, or reject it with
    the text of the exception `becomes` raised."""
    left = limit
    while left is None or left > 0:
        want = batch if left is None else min(batch, left)
        received = receive(source, want, wait_ms)
        if received is None:
            return
        if left is not None:
            left -= len(received)
        for message in received:
            try:
                made = becomes(message)
            except (Fatal, PublishError):
                raise
            except Exception as error:  # noqa: BLE001 (any failure of `becomes` rejects the message)
                reject(message, f"{type(error).__name__}: {error}")
                continue
            if isinstance(made, Document):
                publish(publisher, message, made)
            elif isinstance(made, Delete):
                delete(publisher, message, made.id)
            elif made is not None:
                raise TypeError(f"becomes() returned {type(made).__name__}: expected a weir.Document, messages.Delete or None")
            finish(message)


def _publisher(publisher: Publisher) -> Any:
    if not isinstance(publisher, Publisher):
        raise TypeError(f"takes the weir.Publisher lent to execute(), not {type(publisher).__name__}")
    return publisher._lent()


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"the {what} must be a str, not {type(value).__name__}")
    return value
