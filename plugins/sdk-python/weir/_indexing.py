"""What an indexer subclasses (`Indexer`) and is handed (`BatchEntry`).

An indexer never holds documents: the host prepares each batch entry outside the
plugin, as the indexer's batch format asks (JSON text, picked field values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ._config import Config
from ._errors import DocumentFailure


class Indexer:
    """Sends batches of documents to a backend. Override `index_batch`.

    What each batch entry carries is said once, at start, by these attributes
    (set on the class, or on `self` in `configure`); the host prepares it
    outside the plugin:

    - `wants_json` (default True): `entry.json` is the document as JSON text,
      for backends that send documents whole;
    - `json_fields` (default None: every field): with `wants_json`, only `id`,
      `run_id` and these fields, in this order (`_children` keeps children);
    - `json_omit`: with `wants_json`, names left out of the JSON (fields that
      steer indexing; may name `id`, `run_id`, `_children`);
    - `pick`: fields whose values every entry carries as text, in
      `entry.picked[name]` (a list, empty when the field is absent).
    """

    wants_json: bool = True
    json_fields: Sequence[str] | None = None
    json_omit: Sequence[str] = ()
    pick: Sequence[str] = ()

    def configure(self, config: Config) -> None:
        """Read the settings (the default takes none)."""

    def start(self) -> None:
        """Prepare the backend; called once per instance after `configure`."""

    def validate_connection(self) -> None:
        """Check the backend is reachable; raising stops the run before any document."""

    def index_batch(self, entries: list[BatchEntry]) -> list[DocumentFailure] | None:
        """Index `entries` in order (a later entry with the same id wins).

        Return the entries the backend refused, as `weir.DocumentFailure(entry.index,
        message, status=None, transient=False)`, or None when all were indexed;
        raise `weir.BatchError` when the whole batch failed.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Flush and release what `start` acquired."""


@dataclass
class BatchEntry:
    """One document of a batch: its position `index` in the batch, `id`, `run_id`,
    `json` (its JSON text when the indexer `wants_json`, else None) and `picked`
    (for each field of the indexer's `pick`, its values as text)."""

    index: int
    id: str
    run_id: str | None
    json: str | None
    picked: dict[str, list[str]]
