"""The `indexer` world's export, `weir:plugin/indexer-api`, for the app's `weir.Indexer` subclass."""

from __future__ import annotations

from typing import Any

from componentize_py_types import Err
from wit_world.exports import indexer_api as wit
from wit_world.imports.types import PluginError_Transient

from . import _log, _runtime
from ._codec import safe_text
from ._errors import BatchError, DocumentFailure
from ._indexing import BatchEntry, Indexer

_pick: list[str] = []
"""The fields the indexer picks, as it said at start (the order of `entry.picked`)."""


def export(app: Any) -> type:
    """The `IndexerApi` class componentize-py exports, for the indexer that `app` defines."""
    cls = _runtime.plugin_class(app, Indexer)
    if cls.index_batch is Indexer.index_batch:
        raise TypeError(f"{cls.__name__} must define index_batch(self, entries)")

    class IndexerApi:
        def check_config(self, config: str) -> list:
            return _runtime.check_config(cls, config)

        def start(self, config: str) -> wit.BatchFormat:
            return _runtime.start(cls, config, _start, "start()")

        def validate_connection(self) -> None:
            _runtime.lifecycle("validate_connection()", lambda: _runtime.plugin.validate_connection())

        def index_batch(self, batch: list) -> list:
            _log.go_live()
            try:
                entries = [
                    BatchEntry(index, entry.id, entry.run_id, entry.json, dict(zip(_pick, entry.picked)))
                    for index, entry in enumerate(batch)
                ]
                return _failures(_runtime.plugin.index_batch(entries), len(entries))
            except BaseException as error:
                raise Err(_batch_error(error)) from None
            finally:
                _log.flush()

        def close(self) -> None:
            if _runtime.plugin is not None:
                _runtime.lifecycle("close()", _runtime.plugin.close)

    return IndexerApi


def _start(plugin: Indexer) -> wit.BatchFormat:
    """Start `plugin` and say what its batches carry."""
    global _pick
    plugin.start()
    _pick = _names(plugin.pick, "pick")
    fields = None if plugin.json_fields is None else _names(plugin.json_fields, "json_fields")
    return wit.BatchFormat(bool(plugin.wants_json), fields, _names(plugin.json_omit, "json_omit"), _pick)


def _names(names: Any, attribute: str) -> list[str]:
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"Indexer.{attribute} must be a list of field names, not {names!r}")
    return list(names)


def _failures(result: Any, size: int) -> list:
    """The contract's failures for what `index_batch` returned."""
    if result is None:
        return []
    if not isinstance(result, (list, tuple)) or not all(isinstance(item, DocumentFailure) for item in result):
        raise TypeError(f"index_batch() must return None or a list of weir.DocumentFailure, not {result!r}")
    failures = []
    for failure in result:
        if type(failure.index) is not int or not 0 <= failure.index < size:
            raise ValueError(f"DocumentFailure index {failure.index!r} is not a position in the batch of {size}")
        message = safe_text(str(failure.message))
        failures.append(wit.DocumentFailure(failure.index, message, failure.status, bool(failure.transient)))
    return failures


def _batch_error(error: BaseException) -> wit.BatchError:
    """The batch error for an exception from `index_batch`: `weir.BatchError` as raised;
    `weir.Transient` retried like a connection failure; any other fails the batch."""
    if isinstance(error, BatchError):
        return wit.BatchError(safe_text(error.message), error.status, error.connection_failed)
    reason = _runtime.plugin_error(error, "index_batch()")
    return wit.BatchError(reason.value, None, isinstance(reason, PluginError_Transient))
