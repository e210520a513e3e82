"""The `stage` world's export, `weir:plugin/stage-api`, for the app's `weir.Stage` subclass."""

from __future__ import annotations

from typing import Any

from componentize_py_types import Err

from . import _log, _runtime
from ._document import Document
from ._plugins import Stage


def export(app: Any) -> type:
    """The `StageApi` class componentize-py exports, for the stage that `app` defines."""
    cls = _runtime.plugin_class(app, Stage)
    if cls.process is Stage.process:
        raise TypeError(f"{cls.__name__} must define process(self, doc)")

    class StageApi:
        def check_config(self, config: str) -> list:
            return _runtime.check_config(cls, config)

        def start(self, config: str) -> None:
            _runtime.start(cls, config, lambda plugin: plugin.start(), "start()")

        def process_document(self, handle: Any) -> list:
            _log.go_live()
            doc = Document._wrap(handle, owned=False)
            try:
                return _children(_runtime.plugin.process(doc))
            except BaseException as error:
                raise Err(_runtime.plugin_error(error, "process()")) from None
            finally:
                doc._end_loan()
                _log.flush()

        def stop(self) -> None:
            if _runtime.plugin is not None:
                _runtime.lifecycle("stop()", _runtime.plugin.stop)

    return StageApi


def _children(result: Any) -> list:
    """The handles of the child documents `process` returned."""
    if result is None:
        return []
    if not isinstance(result, (list, tuple)) or not all(isinstance(child, Document) for child in result):
        raise TypeError(f"process() must return None or a list of weir.Document, not {result!r}")
    return [child._give("returned by process()") for child in result]
