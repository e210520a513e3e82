"""Conformance stage `conformance-stage` written against the batch API: the
operations of ../stage, a batch per call, each document's failure returned as
its outcome, fields read and written through the several-fields calls
(`get_many`, `get_all_many`, `update`). See ../../README.md."""

import weir

OPERATIONS = ["copy", "rename", "split", "children", "drop", "fail"]


class ConformanceBatchStage(weir.Stage):
    def configure(self, config: weir.Config):
        self.op = config.string("op", one_of=OPERATIONS)
        if self.op in ("copy", "rename"):
            self.source = config.string("from")
            self.target = config.string("to")
        elif self.op == "split":
            self.field = config.string("field")
            self.separator = config.string("separator")
        elif self.op == "children":
            self.field = config.string("field")
        elif self.op == "drop":
            self.field = config.string("field")
            self.equals = config.string("equals")

    def process_batch(self, docs: list[weir.Document]):
        return [getattr(self, self.op)(doc) for doc in docs]

    def copy(self, doc):
        (values,) = doc.get_all_many([self.source])
        if not doc.has(self.source):
            return None
        multi = doc.is_multi_valued(self.source)
        doc.update({self.target: values if multi else values[0]})
        return None

    def rename(self, doc):
        doc.rename(self.source, self.target, mode="overwrite")

    def split(self, doc):
        text = doc.get_string(self.field)
        if text is None:
            return None
        pieces = [piece.strip() for piece in text.split(self.separator)]
        doc.update({self.field: [piece for piece in pieces if piece]})
        return None

    def children(self, doc):
        children = []
        for position, value in enumerate(doc.get_all(self.field)):
            if isinstance(value, dict):
                children.append(weir.Document(f"{doc.id}-{position}", {**value, "parent_id": doc.id}))
        doc.update({self.field: weir.REMOVE})
        return children

    def drop(self, doc):
        if doc.get_string(self.field) == self.equals:
            doc.drop()

    def fail(self, doc):
        transient, fail = doc.get_many(["transient", "fail"])
        if transient is True:
            return weir.Transient(f"service unavailable for {doc.id}")
        if fail is True:
            return weir.Failure(f"cannot process {doc.id}")
        return None
