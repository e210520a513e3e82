"""Incremental sync (contract 0.2.2): state a connector keeps between runs, and deletes.

The host keeps a map of text keys to text values per connector (per pipeline and
connector name). Reads see this run's changes at once; a change is kept for the next
run only once every document published before it is done (indexed, dropped, or failed
and dead-lettered), so a run that crashes or is stopped keeps exactly the state of the
work it finished. The usual loop: for each item of the source that is new or changed
(its version differs from `get`), publish it, then `set` its version; then, for each
key the source no longer has, `delete` the document, then `remove` the key:

    import weir
    from weir import sync

    class Items(weir.Connector):
        def execute(self, publisher):
            seen = set()
            for item in self.source.list():
                seen.add(item.key)
                if sync.full_sync() or sync.get(item.key) != item.etag:
                    publisher.publish(weir.Document(item.key, item.fields))
                    sync.set(item.key, item.etag)
            for key in [key for key, _ in sync.entries() if key not in seen]:
                sync.delete(publisher, key)
                sync.remove(key)

A refused change or delete (a key over 1 KiB, a value over 64 KiB, the state over
`limits.max_state_mib`; the run stopping) raises `weir.Fatal` with the host's reason:
left uncaught, it stops the run with that message.

Only connectors have this module (`weir.sync` exists when building a connector).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from componentize_py_types import Err
from wit_world.imports import sync as _host

from ._errors import Fatal
from ._plugins import Publisher

__all__ = ["Size", "delete", "entries", "full_sync", "get", "remove", "set", "size"]

_PAGE = 1024
"""Entries asked of the host per `list` call by `entries`."""


class Size(NamedTuple):
    """What `size` answers: how many keys, and the UTF-8 bytes of keys and values together."""

    keys: int
    bytes: int


def get(key: str) -> str | None:
    """The value under `key`: the last one this run set, else the one earlier runs kept;
    None when there is none."""
    return _host.get(_text(key, "key"))


def set(key: str, value: str) -> None:  # noqa: A001 (the contract's name)
    """Keep `value` under `key`, for the next run once every document published so far
    is done. Raises `weir.Fatal` when the host refuses it (the key or value is too large,
    the state is over its limit)."""
    try:
        _host.set(_text(key, "key"), _text(value, "value"))
    except Err as error:
        raise Fatal(error.value) from None


def remove(key: str) -> None:
    """Forget `key` (nothing happens when it is absent), kept as `set` keeps a value.
    Raises `weir.Fatal` when the host refuses it."""
    try:
        _host.remove(_text(key, "key"))
    except Err as error:
        raise Fatal(error.value) from None


def size() -> Size:
    """How many keys `get` sees, and the UTF-8 bytes of their keys and values together."""
    keys, total = _host.size()
    return Size(keys, total)


def full_sync() -> bool:
    """Whether this run sends everything again (`weir run --full`): publish every item as
    if it were new, and still `delete` the items the state holds that are gone."""
    return _host.full_sync()


def delete(publisher: Publisher, id: str) -> None:  # noqa: A002 (the contract's name)
    """Publish a deletion marker for document `id` (the item is gone from the source): it
    skips the stages, reaches the indexer in order with the documents of the same id, and
    the indexer deletes the document. Raises `weir.Fatal` when the host refuses it, as it
    refuses a publish (the run is stopping)."""
    if not isinstance(publisher, Publisher):
        raise TypeError(f"delete() takes the weir.Publisher lent to execute(), not {type(publisher).__name__}")
    handle = publisher._lent()
    try:
        _host.delete(handle, _text(id, "id"))
    except Err as error:
        raise Fatal(error.value) from None


def entries() -> Iterator[tuple[str, str]]:
    """Every `(key, value)` in key order (byte order of the UTF-8 text), as `get` sees
    them, asked of the host a page at a time. Changes made while iterating are seen for
    the keys not reached yet."""
    after = None
    while True:
        page = _host.list(after, _PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        after = page[-1][0]


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"the state {what} must be a str, not {type(value).__name__}")
    return value
