"""The classes a stage or a connector subclasses (`Stage`, `Connector`), and the publisher.

The host makes one object of the plugin's class per instance, calls `configure`
with its settings, then the lifecycle methods; the object lives as long as the
instance, so state kept on `self` lasts from one call to the next.

`configure` is also called alone, on a throw-away object, to check the settings
before a run: it reads and checks settings and acquires nothing (files,
connections); acquire in `start` / `pre_execute`.
"""

from __future__ import annotations

from typing import Any

from componentize_py_types import Err

from ._config import Config
from ._document import Document, _Revoked
from ._errors import PublishError


class Stage:
    """Changes documents one at a time. Override `process`."""

    def configure(self, config: Config) -> None:
        """Read the settings (the default takes none)."""

    def start(self) -> None:
        """Acquire what processing needs; called once per instance after `configure`."""

    def process(self, doc: Document) -> list[Document] | None:
        """Change `doc` in place; return new child documents to run through the rest of
        the pipeline ahead of `doc`, or None. `doc` is valid during this call only."""
        raise NotImplementedError

    def stop(self) -> None:
        """Release what `start` acquired."""


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

    def _revoke(self) -> None:
        self._handle = _Revoked(
            "the publisher was lent for the duration of execute() only and cannot be used after it returned"
        )
