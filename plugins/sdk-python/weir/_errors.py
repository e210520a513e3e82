"""Exceptions a plugin raises to say how a call failed, and what an indexer reports.

Any other exception fails the current document too: its message becomes
`TypeName: message`.
"""

from __future__ import annotations

from dataclasses import dataclass


class Failure(Exception):
    """Fail the current document (or batch) with exactly this message; the run goes on."""


class Transient(Exception):
    """Fail the current document, which may succeed if tried again later.

    For a service that is down, slow or rate-limited, never for a bad document.
    The host retries as its retry policy says.
    """


class Fatal(Exception):
    """The plugin cannot go on (a lost resource, bad settings found late): the run stops."""


class FieldError(Failure):
    """The host refused a document operation; the message names the field."""


class PublishError(Failure):
    """The host refused a published document (the run is stopping, or the document is
    too large). A connector should stop; left uncaught, the message becomes its error."""


class BatchError(Exception):
    """Raised by `Indexer.index_batch`: the whole batch failed.

    `status` is the backend's (HTTP-like) status, if any; a status the host is
    configured to retry (by default 429 and 503), or `connection_failed=True`
    (the backend could not be reached), makes the host retry the batch.
    """

    def __init__(self, message: str, status: int | None = None, connection_failed: bool = False):
        super().__init__(message)
        self.message = str(message)
        self.status = _check_status(status)
        self.connection_failed = bool(connection_failed)


@dataclass
class DocumentFailure:
    """One document of a batch that the backend refused, by its position in the batch.

    `status` is the backend's status for it, if any; `transient=True` says that
    trying it again later may succeed.
    """

    index: int
    message: str
    status: int | None = None
    transient: bool = False

    def __post_init__(self) -> None:
        _check_status(self.status)


def _check_status(status: int | None) -> int | None:
    if status is not None and not (type(status) is int and 0 <= status <= 65535):
        raise ValueError(f"status must be an integer from 0 to 65535, got {status!r}")
    return status
