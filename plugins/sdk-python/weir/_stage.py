"""The stage worlds' exports, for the app's `weir.Stage` subclass.

`export` makes the `batch-stage` world's `weir:plugin/stage-batch-api` (0.2.1):
the host lends a batch of documents per call, and `Stage.process_batch` (by
default `process` on each in turn) says what became of each. A plugin that
implements only `process` runs this way too, so one call into Python serves
the whole batch.

`export_lent` makes the `lent-stage` world's `weir:plugin/stage-lent-api`, beside
`export`'s: the host lends the batch as one handle whose documents are addressed by
position, so no handle is made per document unless the plugin needs one, and only
the documents that failed or made children are answered.

`export_per_document` makes the `stage` world's `weir:plugin/stage-api`, one
call per document, through the same code as a batch of one.
"""

from __future__ import annotations

import weakref
from typing import Any

from componentize_py_types import Err

from . import _batches, _log, _runtime
from ._document import Document
from ._plugins import Stage


def export(app: Any) -> type:
    """The `StageBatchApi` class componentize-py exports, for the stage that `app` defines."""
    cls = _stage_class(app)
    from wit_world.exports.stage_batch_api import Outcome_Done, Outcome_Failed

    class StageBatchApi:
        def check_config(self, config: str) -> list:
            return _runtime.check_config(cls, config)

        def start(self, config: str) -> None:
            _runtime.start(cls, config, lambda plugin: plugin.start(), "start()")

        def process_batch(self, handles: list) -> list:
            _log.go_live()
            lent: list = []
            try:
                return [
                    done if outcome is None else _outcome(outcome, _call, Outcome_Done, Outcome_Failed)
                    for outcome in _run(Document._lend(handles), lent)
                ]
            except BaseException as error:
                raise Err(_runtime.plugin_error(error, _call)) from None
            finally:
                _end_loans(lent)
                for handle in handles:
                    handle.__exit__(None, None, None)
                _log.flush()

        def stop(self) -> None:
            if _runtime.plugin is not None:
                _runtime.lifecycle("stop()", _runtime.plugin.stop)

    _call = "process_batch()" if cls.process_batch is not Stage.process_batch else "process()"
    done = Outcome_Done([])  # shared: the host only reads it
    return StageBatchApi


def export_lent(app: Any) -> type:
    """The `StageLentApi` class componentize-py exports beside `StageBatchApi` (the
    `lent-stage` world): the host lends the batch as one handle, by position, and
    only the documents that failed or made children are answered."""
    cls = _stage_class(app)
    from wit_world.exports.stage_lent_api import Outcome_Done, Outcome_Failed

    class StageLentApi:
        def process_lent(self, batch: Any) -> list:
            _log.go_live()
            lent: list = []
            lending = _batches._Batch(batch)
            try:
                outcomes = _run(Document._lend_batch(lending), lent)
                return [
                    (at, _outcome(outcome, _call, Outcome_Done, Outcome_Failed))
                    for at, outcome in enumerate(outcomes)
                    if outcome is not None
                ]
            except BaseException as error:
                raise Err(_runtime.plugin_error(error, _call)) from None
            finally:
                _end_loans(lent)
                for handle in lending.handles.values():
                    handle.__exit__(None, None, None)
                _log.flush()

    _call = "process_batch()" if cls.process_batch is not Stage.process_batch else "process()"
    return StageLentApi


def export_per_document(app: Any) -> type:
    """The `StageApi` class componentize-py exports (the per-document `stage` world)."""
    cls = _stage_class(app)

    class StageApi:
        def check_config(self, config: str) -> list:
            return _runtime.check_config(cls, config)

        def start(self, config: str) -> None:
            _runtime.start(cls, config, lambda plugin: plugin.start(), "start()")

        def process_document(self, handle: Any) -> list:
            _log.go_live()
            lent: list = []
            try:
                (outcome,) = _run(Document._lend([handle]), lent)
                if isinstance(outcome, BaseException):
                    raise outcome
                return _children(outcome)
            except BaseException as error:
                raise Err(_runtime.plugin_error(error, _call)) from None
            finally:
                _end_loans(lent)
                _log.flush()

        def stop(self) -> None:
            if _runtime.plugin is not None:
                _runtime.lifecycle("stop()", _runtime.plugin.stop)

    _call = "process_batch()" if cls.process_batch is not Stage.process_batch else "process()"
    return StageApi


def _stage_class(app: Any) -> type:
    """The app's stage class, which must implement `process` or `process_batch`."""
    cls = _runtime.plugin_class(app, Stage)
    if cls.process is Stage.process and cls.process_batch is Stage.process_batch:
        raise TypeError(f"{cls.__name__} must define process(self, doc) or process_batch(self, docs)")
    return cls


def _run(docs: list, lent: list) -> list:
    """Lend `docs` to the plugin's `process_batch`; its outcomes, checked, once the
    changes kept for the batch are made (a document whose change the host refuses
    fails with it). Weak references to the documents go to `lent`: once this
    returns, only those the plugin still holds are alive."""
    lent.extend(map(weakref.ref, docs))
    try:
        outcomes = list(_outcomes(_runtime.plugin.process_batch(docs), len(docs)))
    except BaseException:
        _batches._flush_batch(docs, [None] * len(docs))  # left as the plugin left them
        raise
    _batches._flush_batch(docs, outcomes)
    return outcomes


def _end_loans(lent: list) -> None:
    """End the loans of a call's documents: those the plugin still holds (kept on `self`,
    say) are told, so that a later use raises an error naming the document; asking the
    host for the id of the others, which nothing can reach, would cost a call each."""
    for ref in lent:
        doc = ref()
        if doc is not None:
            doc._end_loan()


def _outcomes(result: Any, count: int) -> list:
    """The outcomes `process_batch` returned for `count` documents, checked."""
    if result is None:
        return [None] * count
    if not isinstance(result, (list, tuple)):
        raise TypeError(f"process_batch() must return None or a list of outcomes, not {type(result).__name__}")
    if len(result) != count:
        raise ValueError(f"process_batch() returned {len(result)} outcomes for {count} documents (one per document)")
    return result


def _outcome(outcome: Any, call: str, done: type, failed: type) -> Any:
    """The WIT `outcome` of one document: `done` with its children, or `failed` with
    the exception it is (or that its children raise: not documents, or lent ones)."""
    try:
        if isinstance(outcome, BaseException):
            raise outcome
        return done(_children(outcome))
    except BaseException as error:
        return failed(_runtime.plugin_error(error, call))


def _children(result: Any) -> list:
    """The handles of the child documents of one outcome."""
    if result is None:
        return []
    if not isinstance(result, (list, tuple)) or not all(isinstance(child, Document) for child in result):
        raise TypeError(f"process() must return None or a list of weir.Document, not {result!r}")
    return [child._give("returned by process()") for child in result]
